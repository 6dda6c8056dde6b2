package io.kinesnow.nifi.nativebridge;

/** A bug or broken invariant in the native engine; logged with context. Thrown by the native library. */
public class FatalNativeException extends NativeException {
    private static final long serialVersionUID = 1L;

    public FatalNativeException(final String message) {
        super(message);
    }
}
