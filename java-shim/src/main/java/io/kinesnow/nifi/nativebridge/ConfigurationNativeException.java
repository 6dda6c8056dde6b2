package io.kinesnow.nifi.nativebridge;

/** The settings or the environment are wrong; the message tells the user what to change. Thrown by the native library. */
public class ConfigurationNativeException extends NativeException {
    private static final long serialVersionUID = 1L;

    public ConfigurationNativeException(final String message) {
        super(message);
    }
}
