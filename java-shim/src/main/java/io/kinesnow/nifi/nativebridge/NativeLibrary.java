package io.kinesnow.nifi.nativebridge;

import java.util.Locale;
import java.util.Optional;

/**
 * Loads the Rust core ({@code libkinesnow_core.so}) lazily, on first validation or scheduling, never in a
 * constructor or static initializer: NiFi's NAR plugin instantiates every processor at build time to write docs.
 * Inside NiFi the library is found in the NAR's {@code bundled-dependencies/native/} folder; in tests, on
 * {@code java.library.path}.
 */
public final class NativeLibrary {
    public static final String LIBRARY_NAME = "kinesnow_core";
    public static final String SUPPORTED_PLATFORMS = "Linux x86_64";

    private static volatile Optional<String> loadFailure;

    private NativeLibrary() {
    }

    /**
     * Loads the library if not yet loaded.
     *
     * @return empty when the library is usable, otherwise why not (shown to the user as a validation error)
     */
    public static Optional<String> load() {
        Optional<String> result = loadFailure;
        if (result == null) {
            synchronized (NativeLibrary.class) {
                result = loadFailure;
                if (result == null) {
                    result = tryLoad(System.getProperty("os.name"), System.getProperty("os.arch"));
                    loadFailure = result;
                }
            }
        }
        return result;
    }

    /** Loads the library or throws a {@link ConfigurationNativeException} saying why it cannot be. */
    public static void require() {
        load().ifPresent(reason -> {
            throw new ConfigurationNativeException(reason);
        });
    }

    static boolean isSupportedPlatform(final String osName, final String osArch) {
        final String os = osName == null ? "" : osName.toLowerCase(Locale.ROOT);
        final String arch = osArch == null ? "" : osArch.toLowerCase(Locale.ROOT);
        return os.startsWith("linux") && (arch.equals("amd64") || arch.equals("x86_64"));
    }

    static String unsupportedPlatformMessage(final String osName, final String osArch) {
        return "This NAR bundles its native engine only for " + SUPPORTED_PLATFORMS + "; this NiFi runs on "
                + osName + " " + osArch + ", so the processor cannot run here";
    }

    private static Optional<String> tryLoad(final String osName, final String osArch) {
        if (!isSupportedPlatform(osName, osArch)) {
            return Optional.of(unsupportedPlatformMessage(osName, osArch));
        }
        try {
            System.loadLibrary(LIBRARY_NAME);
            return Optional.empty();
        } catch (final UnsatisfiedLinkError | SecurityException e) {
            return Optional.of("The native library " + System.mapLibraryName(LIBRARY_NAME)
                    + " could not be loaded: " + e.getMessage());
        }
    }
}
