package io.kinesnow.nifi.nativebridge;

/** Receives the native engine's log events for one component. Called from a native thread. */
public interface NativeLogSink {
    int TRACE = 1;
    int DEBUG = 2;
    int INFO = 3;
    int WARN = 4;
    int ERROR = 5;

    void log(int level, String message);
}
