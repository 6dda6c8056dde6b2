package io.kinesnow.nifi.processors;

import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.util.MockProcessContext;
import org.apache.nifi.util.TestRunner;

import java.util.Collection;
import java.util.List;
import java.util.function.Supplier;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

final class ProcessorTestSupport {
    private ProcessorTestSupport() {
    }

    static Collection<ValidationResult> problems(final TestRunner runner) {
        return ((MockProcessContext) runner.getProcessContext()).validate().stream()
                .filter(r -> !r.isValid()).collect(Collectors.toList());
    }

    /** Asserts that validation fails and some explanation for {@code subject} contains {@code text}. */
    static void assertProblem(final TestRunner runner, final String subject, final String text) {
        final Collection<ValidationResult> problems = problems(runner);
        final boolean found = problems.stream().anyMatch(r ->
                subject.equals(r.getSubject()) && r.getExplanation() != null && r.getExplanation().contains(text));
        assertTrue(found, "expected a problem for '" + subject + "' containing '" + text + "', got " + problems);
    }

    /** Waits (the log bridge is asynchronous) until a message satisfies the condition. */
    static void eventually(final Supplier<List<String>> messages, final String text) {
        final long deadline = System.nanoTime() + 5_000_000_000L;
        while (System.nanoTime() < deadline) {
            if (messages.get().stream().anyMatch(m -> m.contains(text))) {
                return;
            }
            try {
                Thread.sleep(20);
            } catch (final InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        fail("no log message containing '" + text + "' in " + messages.get());
    }
}
