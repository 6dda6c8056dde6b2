package io.kinesnow.nifi.nativebridge;

/**
 * Base of the exceptions the native library throws. Every Rust error and panic reaches Java as one of
 * the three subclasses, so callers can decide between retrying, stopping with a message, and reporting a bug.
 */
public abstract class NativeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    protected NativeException(final String message) {
        super(message);
    }
}
