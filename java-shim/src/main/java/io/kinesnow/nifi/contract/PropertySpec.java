// Generated from rust-core/src/contract/properties.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

import java.util.List;

/** One property as the engine reads it: its name, default (null: none) and allowed values (empty: any). */
public record PropertySpec(String name, String defaultValue, List<String> allowed) {
}
