//! Reading the big-endian JNI layouts (`sink_io`'s FlowFiles, and `batch`'s records when tests
//! read them back as Java does): a cursor over the bytes that never reads past their end.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("cut short at byte {0}")]
    Truncated(usize),
    #[error("a text is not UTF-8")]
    NotUtf8,
}

pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Whether every byte was read.
    #[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(WireError::Truncated(self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    #[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A length written as i32; a negative one cannot be read.
    pub fn len(&mut self) -> Result<usize, WireError> {
        usize::try_from(self.i32()?).map_err(|_| WireError::Truncated(self.at))
    }

    /// `str32 := length:i32 utf8`
    pub fn str32(&mut self) -> Result<String, WireError> {
        let n = self.len()?;
        self.utf8(n)
    }

    /// `str16 := length:u16 utf8`
    #[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
    pub fn str16(&mut self) -> Result<String, WireError> {
        let n = u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize;
        self.utf8(n)
    }

    fn utf8(&mut self, n: usize) -> Result<String, WireError> {
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| WireError::NotUtf8)
    }
}
