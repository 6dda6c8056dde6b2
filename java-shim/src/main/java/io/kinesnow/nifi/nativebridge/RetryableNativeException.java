package io.kinesnow.nifi.nativebridge;

/** A transient failure (throttling, network, a lost race): penalize or yield and try again. Thrown by the native library. */
public class RetryableNativeException extends NativeException {
    private static final long serialVersionUID = 1L;

    public RetryableNativeException(final String message) {
        super(message);
    }
}
