//! COBS (consistent overhead byte stuffing): a frame holds no 0 byte, so a
//! single 0 ends it on the wire.

/// Encodes `src` into `dst` and appends the 0 delimiter. Returns the bytes
/// written, or None when `dst` is too small.
pub fn encode(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let mut code_at = 0usize;
    let mut out = 1usize;
    let mut code: u8 = 1;
    for &b in src {
        if b == 0 {
            *dst.get_mut(code_at)? = code;
            code_at = out;
            out += 1;
            code = 1;
        } else {
            *dst.get_mut(out)? = b;
            out += 1;
            code += 1;
            if code == 0xFF {
                *dst.get_mut(code_at)? = code;
                code_at = out;
                out += 1;
                code = 1;
            }
        }
    }
    *dst.get_mut(code_at)? = code;
    *dst.get_mut(out)? = 0;
    Some(out + 1)
}

/// Decodes one frame (without its delimiter) in place. Returns the decoded
/// length, or None when the bytes are no valid COBS (a 0 inside, or a code
/// that runs past the end).
pub fn decode_in_place(buf: &mut [u8]) -> Option<usize> {
    let mut read = 0usize;
    let mut write = 0usize;
    while read < buf.len() {
        let code = buf[read];
        if code == 0 {
            return None;
        }
        read += 1;
        let run = usize::from(code) - 1;
        if read + run > buf.len() {
            return None;
        }
        for i in 0..run {
            let b = buf[read + i];
            if b == 0 {
                return None;
            }
            buf[write] = b;
            write += 1;
        }
        read += run;
        if code != 0xFF && read < buf.len() {
            buf[write] = 0;
            write += 1;
        }
    }
    Some(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let cases: [&[u8]; 6] = [
            &[],
            &[0],
            &[0, 0],
            &[1, 2, 0, 3],
            &[0x11; 254],
            &[0x22; 600],
        ];
        for src in cases {
            let mut wire = [0u8; 1024];
            let n = encode(src, &mut wire).expect("fits");
            assert_eq!(wire[n - 1], 0);
            assert!(!wire[..n - 1].contains(&0));
            let mut buf = [0u8; 1024];
            buf[..n - 1].copy_from_slice(&wire[..n - 1]);
            let m = decode_in_place(&mut buf[..n - 1]).expect("valid");
            assert_eq!(&buf[..m], src);
        }
    }

    #[test]
    fn refuses_bad_codes() {
        let mut b = [5u8, 1, 2];
        assert_eq!(decode_in_place(&mut b), None);
        let mut b = [2u8, 0];
        assert_eq!(decode_in_place(&mut b), None);
    }
}
