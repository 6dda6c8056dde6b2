package io.kinesnow.nifi.nativebridge;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NativeLibraryTest {

    @Test
    void onlyLinuxX8664IsSupported() {
        assertTrue(NativeLibrary.isSupportedPlatform("Linux", "amd64"));
        assertTrue(NativeLibrary.isSupportedPlatform("Linux", "x86_64"));
        assertFalse(NativeLibrary.isSupportedPlatform("Linux", "aarch64"));
        assertFalse(NativeLibrary.isSupportedPlatform("Mac OS X", "x86_64"));
        assertFalse(NativeLibrary.isSupportedPlatform("Windows 11", "amd64"));
        assertFalse(NativeLibrary.isSupportedPlatform(null, null));
    }

    @Test
    void unsupportedPlatformMessageNamesBothPlatforms() {
        final String message = NativeLibrary.unsupportedPlatformMessage("Mac OS X", "aarch64");
        assertTrue(message.contains("Linux x86_64"), message);
        assertTrue(message.contains("Mac OS X aarch64"), message);
    }

    @Test
    void loadsOnThisMachine() {
        assertEquals("", NativeLibrary.load().orElse(""));
    }
}
