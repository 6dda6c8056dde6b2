package io.kinesnow.nifi.processors;

import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.ProcessSession;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * PutSnowflake's sessions kept open across triggers until every FlowFile in them has its outcome, found by FlowFile id,
 * and the held FlowFiles whose content the engine asked for again. Touched only by PutSnowflake's one trigger thread and
 * its {@code @OnStopped}, so nothing here is synchronized.
 */
final class HeldSessions {
    /** One session and the FlowFiles of it that wait for their outcome. */
    static final class Held {
        final ProcessSession session;
        final Map<Long, FlowFile> waiting = new LinkedHashMap<>();
        /** Each waiting FlowFile's evaluated destination, as provenance names it. */
        final Map<Long, String> destinations = new HashMap<>();
        long rowsSent;
        long rowsSkipped;
        long waitingBack;
        long reloaded;

        Held(final ProcessSession session) {
            this.session = session;
        }
    }

    private final List<Held> sessions = new ArrayList<>();
    private final Map<Long, Held> byFlowFile = new HashMap<>();
    /** Held FlowFiles whose content the engine asked for again, in the order asked; handed over before new ones. */
    private final List<Long> resends = new ArrayList<>();

    /** Holds the session until each of its waiting FlowFiles has had {@link #settle}. */
    void hold(final Held held) {
        sessions.add(held);
        for (final Long id : held.waiting.keySet()) {
            byFlowFile.put(id, held);
        }
    }

    /** The session holding the FlowFile while it waits; null once it has its outcome (or its session rolled back). */
    Held of(final long flowFileId) {
        return byFlowFile.get(flowFileId);
    }

    /** The FlowFile has its outcome: its session no longer waits for it. Null when none held it. */
    Held settle(final long flowFileId) {
        return byFlowFile.remove(flowFileId);
    }

    /** Every FlowFile of the session has its outcome: it is committed and forgotten. */
    void release(final Held held) {
        sessions.remove(held);
    }

    /** The engine asks for a waiting FlowFile's content again. */
    void askAgain(final long flowFileId) {
        if (byFlowFile.containsKey(flowFileId)) {
            resends.add(flowFileId);
        }
    }

    /** The FlowFiles asked for again since the last call, in the order asked. */
    List<Long> takeResends() {
        final List<Long> taken = List.copyOf(resends);
        resends.clear();
        return taken;
    }

    boolean hasResends() {
        return !resends.isEmpty();
    }

    /** Rolls every held session back (the processor stops): their FlowFiles return to the queue. */
    void rollBackAll() {
        for (final Held held : sessions) {
            held.session.rollback();
        }
        sessions.clear();
        byFlowFile.clear();
        resends.clear();
    }
}
