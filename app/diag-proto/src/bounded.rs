//! Fixed-capacity text and lists with a compile-time maximum encoded size.
//!
//! postcard's `MaxSize` derive does not accept heapless 0.9 containers, so
//! these thin wrappers implement `MaxSize` (and delegate `Schema`) by hand;
//! on the wire they are exactly a postcard string and a postcard sequence.

use core::ops::Deref;

use postcard::experimental::max_size::MaxSize;
use postcard_schema::Schema;
use postcard_schema::schema::NamedType;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes a postcard varint of a length up to `n` takes.
pub const fn varint_len(n: usize) -> usize {
    let mut len = 1;
    let mut v = n >> 7;
    while v > 0 {
        len += 1;
        v >>= 7;
    }
    len
}

/// UTF-8 text of at most `N` bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text<const N: usize>(pub heapless::String<N>);

impl<const N: usize> Text<N> {
    /// `s`, cut at a character boundary to fit `N` bytes.
    pub fn truncate_from(s: &str) -> Self {
        let mut out = heapless::String::new();
        for c in s.chars() {
            if out.push(c).is_err() {
                break;
            }
        }
        Text(out)
    }

    /// `s` when it fits, else None.
    pub fn try_from_str(s: &str) -> Option<Self> {
        let mut out = heapless::String::new();
        out.push_str(s).ok()?;
        Some(Text(out))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl<const N: usize> Deref for Text<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl<const N: usize> core::fmt::Display for Text<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl<const N: usize> Serialize for Text<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl<'de, const N: usize> Deserialize<'de> for Text<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        heapless::String::<N>::deserialize(d).map(Text)
    }
}

impl<const N: usize> MaxSize for Text<N> {
    const POSTCARD_MAX_SIZE: usize = varint_len(N) + N;
}

impl<const N: usize> Schema for Text<N> {
    const SCHEMA: &'static NamedType = <heapless::String<N> as Schema>::SCHEMA;
}

/// At most `N` values of `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct List<T, const N: usize>(pub heapless::Vec<T, N>);

impl<T, const N: usize> Default for List<T, N> {
    fn default() -> Self {
        List(heapless::Vec::new())
    }
}

impl<T, const N: usize> List<T, N> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `v`; false when the list is full.
    pub fn push(&mut self, v: T) -> bool {
        self.0.push(v).is_ok()
    }
}

impl<T, const N: usize> Deref for List<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Serialize, const N: usize> Serialize for List<T, N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for List<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        heapless::Vec::<T, N>::deserialize(d).map(List)
    }
}

impl<T: MaxSize, const N: usize> MaxSize for List<T, N> {
    const POSTCARD_MAX_SIZE: usize = varint_len(N) + N * T::POSTCARD_MAX_SIZE;
}

impl<T: Schema, const N: usize> Schema for List<T, N> {
    const SCHEMA: &'static NamedType = <heapless::Vec<T, N> as Schema>::SCHEMA;
}
