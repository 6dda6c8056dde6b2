//! What the JNI byte layouts share between the languages: each layout's magic, which names the
//! layout and its version (a layout that changes takes a new magic, so a NAR whose Java and
//! native halves disagree fails on the first call instead of misreading bytes), and
//! PutSnowflake's route codes. The layouts themselves are documented where they are written
//! (`ffi::batch`, `ffi::skips`, `ffi::sink_io`). ConsumeKinesis' two routes cross in its batch
//! (`BATCH_ROUTE_*`). The Java twin
//! `io.kinesnow.nifi.contract.Wire` is generated from [`ALL`].

/// One shared integer: its constant, value and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireConstant {
    pub constant: &'static str,
    pub value: i32,
    pub meaning: &'static str,
}

macro_rules! wire {
    ($( #[doc = $doc:literal] $constant:ident: $ty:ty = $value:expr; )*) => {
        $( #[doc = $doc] pub const $constant: $ty = $value; )*

        /// Every constant, in the order written here.
        pub const ALL: &[WireConstant] = &[ $( WireConstant { constant: stringify!($constant), value: $value as i32, meaning: $doc.trim_ascii() } ),* ];
    };
}

wire! {
    /// ConsumeKinesis' batch of FlowFiles, native to Java ("KNB7").
    BATCH_MAGIC: i32 = 0x4B4E_4237;
    /// Records ConsumeKinesis routed to parse.failure, Java to native ("KNS1").
    SKIPS_MAGIC: i32 = 0x4B4E_5331;
    /// PutSnowflake's FlowFiles, Java to native ("KSF1").
    FLOW_FILES_MAGIC: i32 = 0x4B53_4631;
    /// PutSnowflake's outcomes, native to Java ("KSO1").
    OUTCOMES_MAGIC: i32 = 0x4B53_4F31;
    /// PutSnowflake's queued FlowFiles to choose from, Java to native ("KSC1").
    CANDIDATES_MAGIC: i32 = 0x4B53_4331;
    /// ConsumeKinesis' route in its batch: the FlowFile goes to success.
    BATCH_ROUTE_SUCCESS: u8 = 0;
    /// ConsumeKinesis' route in its batch: the FlowFile's record could not be parsed and goes to parse.failure.
    BATCH_ROUTE_PARSE_FAILURE: u8 = 1;
    /// Route: committed into Snowflake.
    ROUTE_SUCCESS: u8 = 0;
    /// Route: content that cannot become rows, or rows Snowflake rejected.
    ROUTE_INVALID: u8 = 1;
    /// Route: not loaded (the reason in snowflake.error.message).
    ROUTE_FAILURE: u8 = 2;
    /// Route: no rows in the content: nothing was sent.
    ROUTE_EMPTY: u8 = 3;
    /// Route: back to the queue, marked for the at-least-once channels.
    ROUTE_RELOAD: u8 = 4;
    /// Route: back to the queue, penalized: it waited for an earlier FlowFile while the in-flight budget was full.
    ROUTE_RETRY: u8 = 5;
    /// Not an outcome: the FlowFile stays held, and its content is handed over again (its channel reopened before its rows, dropped once appended, were committed).
    ROUTE_RESEND: u8 = 6;
}

#[cfg(test)]
pub(super) fn java_twin() -> String {
    let mut out = super::java_class_head(
        "wire.rs",
        "The JNI layouts' magics and PutSnowflake's route codes, shared with the engine.",
        "Wire",
    );
    for c in ALL {
        let value = if c.constant.ends_with("_MAGIC") { format!("0x{:08X}", c.value) } else { c.value.to_string() };
        out.push_str(&format!(
            "\n    /** {} */\n    public static final int {} = {};\n",
            c.meaning.replace("*/", "* /"),
            c.constant,
            value
        ));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_are_distinct_and_spell_their_names() {
        let magics: Vec<_> = ALL.iter().filter(|c| c.constant.ends_with("_MAGIC")).collect();
        for (i, a) in magics.iter().enumerate() {
            assert!(a.value.to_be_bytes().iter().all(u8::is_ascii_alphanumeric), "{} is not four letters", a.constant);
            for b in &magics[i + 1..] {
                assert_ne!(a.value, b.value, "{} and {}", a.constant, b.constant);
            }
        }
    }
}
