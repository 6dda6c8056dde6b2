//! The MD5 digest that closes every KPL aggregate, computed by AWS-LC's assembly implementation
//! (`aws-lc-sys`, already linked for the AWS SDK's TLS). On this project's x86_64 machines it runs at
//! OpenSSL's speed, about 2.5 times the pure-Rust `md-5` crate (see BENCHMARKS.md, KPL
//! de-aggregation); de-aggregation spends most of its time here.

/// The 16-byte MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    // SAFETY: AWS-LC's one-shot MD5 reads exactly `data.len()` bytes from `data` and writes exactly
    // 16 bytes (MD5_DIGEST_LENGTH) into `out`; both live for the whole call and do not overlap.
    unsafe {
        aws_lc_sys::MD5(data.as_ptr(), data.len(), out.as_mut_ptr());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::md5 as digest;
    use md5::{Digest, Md5};

    #[test]
    fn rfc_1321_test_suite() {
        let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(digest(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(digest(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(digest(b"12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn agrees_with_the_md5_crate_at_every_length_around_block_edges() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in (0..200).chain([511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 5000]) {
            assert_eq!(digest(&data[..len]).as_slice(), Md5::digest(&data[..len]).as_slice(), "length {len}");
        }
    }
}
