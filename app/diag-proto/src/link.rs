//! One serial link carries two things: postcard-rpc frames (COBS, ended by
//! 0) and a person's text lines (printable ASCII, ended by CR or LF).
//! [`LinkDecoder`] tells them apart without a mode switch:
//!
//! - Byte 0 of a COBS frame is a code byte (any value but 0); byte 1 is the
//!   postcard-rpc header's discriminant `0bNNMM_0000` (or its first
//!   key byte when the discriminant is 0). With 4- or 8-byte keys, which
//!   postcard-rpc clients use (they start with 8 and this unit never asks
//!   for shorter), the discriminant is 0x80 or above.
//! - A text line is ASCII: its bytes are below 0x80.
//!
//! So the second byte decides: 0x80 and above (or a control byte other than
//! backspace, tab, CR and LF) starts a frame; otherwise the two bytes begin
//! a text line, echoed from then on. A lone first byte that is followed by
//! silence (a person typing) is taken as text after [`LinkDecoder::idle`].
//! A 0 always ends whatever was being received. Frames whose header uses a
//! 1- or 2-byte key are not supported (they may read as text).

/// Longest text line kept; longer lines are answered with an error.
pub const MAX_LINE: usize = 120;

/// What the bytes fed to [`LinkDecoder::push`] amount to.
#[derive(Debug, PartialEq, Eq)]
pub enum LinkEvent<'a> {
    /// A complete frame, COBS-decoded (header and body).
    Frame(&'a mut [u8]),
    /// A frame that could not be taken: bad COBS, or too long.
    BadFrame(FrameFault),
    /// Text bytes to echo back to the person typing.
    Echo(&'a [u8]),
    /// The last character of the line was erased: echo "\x08 \x08".
    Erase,
    /// A complete text line (without its CR/LF); `overflowed` when it was
    /// longer than [`MAX_LINE`] and got cut.
    Line { text: &'a str, overflowed: bool },
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum FrameFault {
    /// The bytes before the 0 were no valid COBS.
    Cobs { len: usize },
    /// More bytes than a frame may have arrived before the 0.
    TooLong { len: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a frame or line.
    Start,
    /// One byte seen, not yet decided.
    Pending(u8),
    Text,
    Frame,
    /// A frame too long for the buffer: bytes are counted until the 0.
    Discard,
}

fn is_line_end(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// Bytes a text line may contain (a person's keyboard): printable ASCII,
/// tab, backspace, DEL, escape sequences (arrow keys; ignored), CR and LF.
fn is_text(b: u8) -> bool {
    matches!(b, 0x08 | 0x09 | 0x0A | 0x0D | 0x1B | 0x20..=0x7F)
}

/// Splits the byte stream of a link into frames and text lines. `N` is the
/// frame buffer (COBS bytes); it never allocates.
pub struct LinkDecoder<const N: usize> {
    state: State,
    buf: [u8; N],
    len: usize,
    line: [u8; MAX_LINE],
    line_len: usize,
    line_overflow: bool,
    /// The last line ended with CR: an LF right after it is part of the same end.
    after_cr: bool,
}

impl<const N: usize> Default for LinkDecoder<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LinkDecoder<N> {
    pub const fn new() -> Self {
        LinkDecoder {
            state: State::Start,
            buf: [0; N],
            len: 0,
            line: [0; MAX_LINE],
            line_len: 0,
            line_overflow: false,
            after_cr: false,
        }
    }

    /// True while a text line is being typed (the console is in use).
    pub fn in_line(&self) -> bool {
        self.state == State::Text
    }

    /// Feeds one byte; `out` gets what it completes.
    pub fn push(&mut self, b: u8, out: &mut dyn FnMut(LinkEvent<'_>)) {
        let after_cr = core::mem::replace(&mut self.after_cr, false);
        match self.state {
            State::Start => {
                if b == 0 || (b == b'\n' && after_cr) {
                    return;
                }
                self.state = State::Pending(b);
            }
            State::Pending(p) => {
                if b == 0 {
                    // One byte and a 0: a stray byte, or an empty text line.
                    self.state = State::Start;
                    if !is_line_end(p) {
                        out(LinkEvent::BadFrame(FrameFault::Cobs { len: 1 }));
                    }
                } else if is_text(b) && is_line_end(p) {
                    // An empty line; the new byte starts afresh.
                    self.state = State::Start;
                    self.emit_empty_line(p, out);
                    self.push(b, out);
                } else if is_text(b) && is_text(p) {
                    self.begin_text();
                    self.text_byte(p, out);
                    self.text_byte(b, out);
                } else {
                    self.state = State::Frame;
                    self.buf[0] = p;
                    self.len = 1;
                    self.frame_byte(b, out);
                }
            }
            State::Text => {
                if b == 0 {
                    self.state = State::Start;
                } else {
                    self.text_byte(b, out);
                }
            }
            State::Frame => self.frame_byte(b, out),
            State::Discard => {
                if b == 0 {
                    self.state = State::Start;
                    out(LinkEvent::BadFrame(FrameFault::TooLong { len: self.len }));
                    self.len = 0;
                } else {
                    self.len = self.len.saturating_add(1);
                }
            }
        }
    }

    /// The line has been silent for a while: a lone printable first byte
    /// (or CR/LF) was typed by a person, not the start of a frame.
    pub fn idle(&mut self, out: &mut dyn FnMut(LinkEvent<'_>)) {
        if let State::Pending(p) = self.state {
            if is_line_end(p) {
                self.state = State::Start;
                self.emit_empty_line(p, out);
            } else if is_text(p) {
                self.begin_text();
                self.text_byte(p, out);
            }
        }
    }

    fn emit_empty_line(&mut self, end: u8, out: &mut dyn FnMut(LinkEvent<'_>)) {
        self.after_cr = end == b'\r';
        out(LinkEvent::Line {
            text: "",
            overflowed: false,
        });
    }

    fn begin_text(&mut self) {
        self.state = State::Text;
        self.line_len = 0;
        self.line_overflow = false;
    }

    fn text_byte(&mut self, b: u8, out: &mut dyn FnMut(LinkEvent<'_>)) {
        match b {
            b'\r' | b'\n' => {
                self.state = State::Start;
                self.after_cr = b == b'\r';
                // Only printable ASCII is ever stored, so this is UTF-8.
                let text = core::str::from_utf8(&self.line[..self.line_len]).unwrap_or("");
                out(LinkEvent::Line {
                    text,
                    overflowed: self.line_overflow,
                });
            }
            // Backspace on an empty line falls to the last arm: nothing.
            0x08 | 0x7F if self.line_len > 0 => {
                self.line_len -= 1;
                out(LinkEvent::Erase);
            }
            0x09 | 0x20..=0x7E => {
                let c = if b == 0x09 { b' ' } else { b };
                if self.line_len < MAX_LINE {
                    self.line[self.line_len] = c;
                    self.line_len += 1;
                    out(LinkEvent::Echo(core::slice::from_ref(
                        &self.line[self.line_len - 1],
                    )));
                } else {
                    self.line_overflow = true;
                }
            }
            // Escape sequences and other control bytes: not part of a line.
            _ => {}
        }
    }

    fn frame_byte(&mut self, b: u8, out: &mut dyn FnMut(LinkEvent<'_>)) {
        if b == 0 {
            self.state = State::Start;
            let len = core::mem::take(&mut self.len);
            match crate::cobs::decode_in_place(&mut self.buf[..len]) {
                Some(n) => out(LinkEvent::Frame(&mut self.buf[..n])),
                None => out(LinkEvent::BadFrame(FrameFault::Cobs { len })),
            }
        } else if self.len < N {
            self.buf[self.len] = b;
            self.len += 1;
        } else {
            self.state = State::Discard;
            self.len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Got {
        Frame(heapless::Vec<u8, 64>),
        Bad(FrameFault),
        Echo(u8),
        Erase,
        Line(heapless::String<128>, bool),
    }

    fn feed(bytes: &[u8], idle_after: bool) -> heapless::Vec<Got, 64> {
        let mut d = LinkDecoder::<64>::new();
        let mut got = heapless::Vec::new();
        let mut sink = |e: LinkEvent<'_>| {
            let g = match e {
                LinkEvent::Frame(f) => Got::Frame(heapless::Vec::from_slice(f).unwrap()),
                LinkEvent::BadFrame(f) => Got::Bad(f),
                LinkEvent::Echo(b) => Got::Echo(b[0]),
                LinkEvent::Erase => Got::Erase,
                LinkEvent::Line { text, overflowed } => {
                    Got::Line(heapless::String::try_from(text).unwrap(), overflowed)
                }
            };
            got.push(g).unwrap();
        };
        for &b in bytes {
            d.push(b, &mut sink);
        }
        if idle_after {
            d.idle(&mut sink);
        }
        got
    }

    #[test]
    fn text_line_with_backspace_and_crlf() {
        let got = feed(b"hx\x08elp\r\n", false);
        assert_eq!(
            got.last(),
            Some(&Got::Line("help".try_into().unwrap(), false))
        );
        assert!(got.contains(&Got::Erase));
        assert_eq!(got.iter().filter(|g| matches!(g, Got::Line(..))).count(), 1);
    }

    #[test]
    fn frame_with_key8_is_binary_even_when_bytes_look_like_text() {
        // Raw frame: discriminant 0xE0 (8-byte key, 4-byte seq), key, seq, body "\r\n".
        let raw = [
            0xE0, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h', 1, 0, 0, 0, b'\r', b'\n',
        ];
        let mut wire = [0u8; 64];
        let n = crate::cobs::encode(&raw, &mut wire).unwrap();
        let got = feed(&wire[..n], false);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0], Got::Frame(heapless::Vec::from_slice(&raw).unwrap()));
    }

    #[test]
    fn lone_byte_then_silence_is_text() {
        let got = feed(b"h", true);
        assert_eq!(got.as_slice(), &[Got::Echo(b'h')]);
        let got = feed(b"\r", true);
        assert_eq!(got.as_slice(), &[Got::Line("".try_into().unwrap(), false)]);
    }

    #[test]
    fn oversize_frame_is_reported_and_the_next_one_taken() {
        let mut bytes = heapless::Vec::<u8, 256>::new();
        bytes.extend_from_slice(&[0x05, 0x90]).unwrap();
        for _ in 0..100 {
            bytes.push(0x33).unwrap();
        }
        bytes.push(0).unwrap();
        bytes.extend_from_slice(&[0x02, 0xC0, 0x00]).unwrap();
        let got = feed(&bytes, false);
        assert_eq!(got[0], Got::Bad(FrameFault::TooLong { len: 102 }));
        assert_eq!(
            got[1],
            Got::Frame(heapless::Vec::from_slice(&[0xC0]).unwrap())
        );
    }
}
