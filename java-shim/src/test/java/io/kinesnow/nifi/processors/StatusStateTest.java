package io.kinesnow.nifi.processors;

import org.apache.nifi.annotation.behavior.Stateful;
import org.apache.nifi.components.state.Scope;
import org.apache.nifi.state.MockStateManager;
import org.apache.nifi.util.MockComponentLog;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * View State's status lines share the processor's local state with what the processor keeps there for itself
 * (PutSnowflake's instance.id, part of every channel name): a write or a clear of the status must never lose it.
 */
class StatusStateTest {
    @Stateful(scopes = Scope.LOCAL, description = "what MockStateManager asks of a component using local state")
    private static final class LocalStateUser {
    }

    private final MockComponentLog log = new MockComponentLog("id", this);

    @Test
    void theStatusIsWrittenBesideTheKeptEntriesAndTheClearLeavesThem() throws IOException {
        final MockStateManager state = new MockStateManager(new LocalStateUser());
        state.setState(Map.of("instance.id", "a1b2c3d4e5f6", "channel.old", "from an earlier run"), Scope.LOCAL);
        final StatusState status = new StatusState(Set.of("instance.id"));

        status.update(state, log, () -> new String[] {"channel.kinesnow_a1b2c3d4e5f6_x", "pipe P; committed offset token 7"});

        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6", "channel.kinesnow_a1b2c3d4e5f6_x", "pipe P; committed offset token 7"),
                state.getState(Scope.LOCAL).toMap(), "the earlier run's line is gone, the instance id is kept");
        status.clear(state, log);
        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6"), state.getState(Scope.LOCAL).toMap());
    }

    @Test
    void aStatusLineNeverReplacesAKeptEntry() throws IOException {
        final MockStateManager state = new MockStateManager(new LocalStateUser());
        state.setState(Map.of("instance.id", "a1b2c3d4e5f6"), Scope.LOCAL);
        new StatusState(Set.of("instance.id")).update(state, log, () -> new String[] {"instance.id", "something else"});
        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6"), state.getState(Scope.LOCAL).toMap());
    }

    @Test
    void withNothingKeptTheClearEmptiesTheState() throws IOException {
        final MockStateManager state = new MockStateManager(new LocalStateUser());
        final StatusState status = new StatusState();
        status.update(state, log, () -> new String[] {"node", "n1, leasing 1 shard(s)", "shardId-000000000000", "..."});
        assertEquals(2, state.getState(Scope.LOCAL).toMap().size());
        status.clear(state, log);
        assertEquals(Map.of(), state.getState(Scope.LOCAL).toMap());
    }

    /** PutSnowflake's passed gaps: written from the engine's lines, gone when the engine has none, kept by the clear. */
    @Test
    void theEnginesKeptEntryIsWrittenFromItsLinesAndSurvivesTheClear() throws IOException {
        final MockStateManager state = new MockStateManager(new LocalStateUser());
        state.setState(Map.of("instance.id", "a1b2c3d4e5f6", "passed.gaps", "{\"old\":[]}"), Scope.LOCAL);
        final StatusState status = new StatusState(Set.of("instance.id"), Set.of("passed.gaps"));

        status.update(state, log, () -> new String[] {"channel.x", "open", "passed.gaps", "{\"x\":[[null,\"6\",1]]}"});
        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6", "channel.x", "open", "passed.gaps", "{\"x\":[[null,\"6\",1]]}"),
                state.getState(Scope.LOCAL).toMap());
        status.clear(state, log);
        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6", "passed.gaps", "{\"x\":[[null,\"6\",1]]}"),
                state.getState(Scope.LOCAL).toMap(), "the gaps survive a stop");
        status.update(state, log, () -> new String[] {"channel.x", "open"});
        assertEquals(Map.of("instance.id", "a1b2c3d4e5f6", "channel.x", "open"), state.getState(Scope.LOCAL).toMap(),
                "forgotten once the engine keeps none");
        assertEquals("", PutSnowflake.passedGaps(state));
    }
}
