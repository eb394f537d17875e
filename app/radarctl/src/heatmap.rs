//! The range-Doppler snapshot as a PNG heat map: power in dB (colour bar on
//! the right), range in metres across, radial velocity in m/s up, each
//! detection marked with a magenta ring and labelled. The plot area and the
//! axes go into the PNG's text chunks (`radar:plot`, `radar:range`,
//! `radar:velocity`) so that a program can map pixels back to metres and
//! m/s.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};

use crate::Snapshot;

const W: usize = 900;
const H: usize = 660;
const LEFT: usize = 90;
const TOP: usize = 50;
const PLOT_W: usize = 640;
const PLOT_H: usize = 512;
const BAR_X: usize = LEFT + PLOT_W + 40;
const BAR_W: usize = 24;

/// The markers' colour: not in the colour map, so found exactly.
pub const MARKER: [u8; 3] = [255, 0, 255];
const TEXT: [u8; 3] = [20, 20, 20];
const BG: [u8; 3] = [255, 255, 255];

struct Canvas {
    px: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        let mut px = vec![0u8; W * H * 3];
        for p in px.chunks_exact_mut(3) {
            p.copy_from_slice(&BG);
        }
        Canvas { px }
    }

    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < W && (y as usize) < H {
            let i = (y as usize * W + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn blend(&mut self, x: i64, y: i64, c: [u8; 3], a: f32) {
        if x >= 0 && y >= 0 && (x as usize) < W && (y as usize) < H {
            let i = (y as usize * W + x as usize) * 3;
            for (p, &want) in self.px[i..i + 3].iter_mut().zip(&c) {
                let old = f32::from(*p);
                *p = (old + (f32::from(want) - old) * a.clamp(0.0, 1.0)).round() as u8;
            }
        }
    }

    fn rect(&mut self, x0: usize, y0: usize, w: usize, h: usize, c: [u8; 3]) {
        for y in y0..y0 + h {
            for x in x0..x0 + w {
                self.set(x as i64, y as i64, c);
            }
        }
    }

    fn ring(&mut self, cx: f32, cy: f32, r: f32, thick: f32, c: [u8; 3]) {
        let ext = (r + thick).ceil() as i64;
        for dy in -ext..=ext {
            for dx in -ext..=ext {
                let d = ((dx * dx + dy * dy) as f32).sqrt();
                if (d - r).abs() <= thick / 2.0 {
                    self.set(cx.round() as i64 + dx, cy.round() as i64 + dy, c);
                }
            }
        }
    }

    /// Text with its left end at `x` and baseline at `y`; returns its width.
    fn text(&mut self, font: &FontRef<'_>, size: f32, x: f32, y: f32, s: &str, c: [u8; 3]) -> f32 {
        let scaled = font.as_scaled(PxScale::from(size));
        let mut pen = x;
        for ch in s.chars() {
            let id = scaled.glyph_id(ch);
            let g = id.with_scale_and_position(PxScale::from(size), ab_glyph::point(pen, y));
            if let Some(o) = font.outline_glyph(g) {
                let b = o.px_bounds();
                o.draw(|gx, gy, cov| {
                    self.blend(
                        b.min.x as i64 + gx as i64,
                        b.min.y as i64 + gy as i64,
                        c,
                        cov,
                    );
                });
            }
            pen += scaled.h_advance(id);
        }
        pen - x
    }

    fn text_width(font: &FontRef<'_>, size: f32, s: &str) -> f32 {
        let scaled = font.as_scaled(PxScale::from(size));
        s.chars()
            .map(|ch| scaled.h_advance(scaled.glyph_id(ch)))
            .sum()
    }
}

/// A viridis-like colour for t in [0, 1].
pub fn colour(t: f32) -> [u8; 3] {
    const STOPS: [[f32; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    } * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f32;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    std::array::from_fn(|k| (a[k] + (b[k] - a[k]) * f).round() as u8)
}

/// A tick step of about `span / 6`, rounded to 1, 2 or 5 times a power of ten.
fn tick_step(span: f32) -> f32 {
    let raw = (span / 6.0).max(1e-6);
    let p = 10f32.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

/// Pixel of a range and velocity (centre of the cell they fall in when on
/// a cell centre).
pub fn pixel(info: &diag_proto::SnapshotInfo, range_m: f32, velocity_mps: f32) -> (f32, f32) {
    let cw = PLOT_W as f32 / f32::from(info.range_bins.max(1));
    let ch = PLOT_H as f32 / f32::from(info.doppler_bins.max(1));
    let rs = if info.range_step_m != 0.0 {
        info.range_step_m
    } else {
        1.0
    };
    let vs = if info.velocity_step_mps != 0.0 {
        info.velocity_step_mps
    } else {
        1.0
    };
    let x = LEFT as f32 + ((range_m - info.range_first_m) / rs + 0.5) * cw;
    let y = (TOP + PLOT_H) as f32 - ((velocity_mps - info.velocity_first_mps) / vs + 0.5) * ch;
    (x, y)
}

pub fn render(s: &Snapshot) -> Result<Vec<u8>, String> {
    let font =
        FontRef::try_from_slice(dejavu::sans::regular()).map_err(|e| format!("font: {e}"))?;
    let info = &s.info;
    let (rows, cols) = (usize::from(info.doppler_bins), usize::from(info.range_bins));
    if rows == 0 || cols == 0 || s.cells.len() != rows * cols {
        return Err("snapshot: empty map".into());
    }
    let mut c = Canvas::new();
    let db_max = info.db_floor + 255.0 * info.db_step;
    // Cells: row 0 (lowest velocity) at the bottom.
    for py in 0..PLOT_H {
        let d = rows - 1 - (py * rows / PLOT_H);
        for px in 0..PLOT_W {
            let r = px * cols / PLOT_W;
            let q = s.cells[d * cols + r];
            c.set(
                (LEFT + px) as i64,
                (TOP + py) as i64,
                colour(f32::from(q) / 255.0),
            );
        }
    }
    // Frame.
    for x in LEFT - 1..=LEFT + PLOT_W {
        c.set(x as i64, (TOP - 1) as i64, TEXT);
        c.set(x as i64, (TOP + PLOT_H) as i64, TEXT);
    }
    for y in TOP - 1..=TOP + PLOT_H {
        c.set((LEFT - 1) as i64, y as i64, TEXT);
        c.set((LEFT + PLOT_W) as i64, y as i64, TEXT);
    }
    // Range axis (metres).
    let r_lo = info.range_first_m - info.range_step_m / 2.0;
    let r_hi = r_lo + info.range_step_m * cols as f32;
    let step = tick_step(r_hi - r_lo);
    let mut t = (r_lo / step).ceil() * step;
    while t <= r_hi + 1e-3 {
        let (x, _) = pixel(info, t, info.velocity_first_mps);
        let x = x.round() as i64;
        for dy in 0..6 {
            c.set(x, (TOP + PLOT_H + 1 + dy) as i64, TEXT);
        }
        // + 0.0: ceil() of a small negative is -0.0, printed "-0".
        let label = format!("{:.0}", t + 0.0);
        let w = Canvas::text_width(&font, 14.0, &label);
        c.text(
            &font,
            14.0,
            x as f32 - w / 2.0,
            (TOP + PLOT_H + 22) as f32,
            &label,
            TEXT,
        );
        t += step;
    }
    let xl = "range (m)";
    let w = Canvas::text_width(&font, 16.0, xl);
    c.text(
        &font,
        16.0,
        (LEFT + PLOT_W / 2) as f32 - w / 2.0,
        (TOP + PLOT_H + 46) as f32,
        xl,
        TEXT,
    );
    // Velocity axis (m/s).
    let v_lo = info.velocity_first_mps - info.velocity_step_mps / 2.0;
    let v_hi = v_lo + info.velocity_step_mps * rows as f32;
    let step = tick_step(v_hi - v_lo);
    let mut t = (v_lo / step).ceil() * step;
    while t <= v_hi + 1e-3 {
        let (_, y) = pixel(info, info.range_first_m, t);
        let y = y.round() as i64;
        for dx in 0..6 {
            c.set((LEFT - 2 - dx) as i64, y, TEXT);
        }
        let label = if t == 0.0 {
            "0".to_string()
        } else {
            format!("{t:+.0}")
        };
        let w = Canvas::text_width(&font, 14.0, &label);
        c.text(
            &font,
            14.0,
            LEFT as f32 - 10.0 - w,
            y as f32 + 5.0,
            &label,
            TEXT,
        );
        t += step;
    }
    c.text(&font, 16.0, 8.0, (TOP - 14) as f32, "velocity (m/s)", TEXT);
    let title = format!("range-Doppler power, frame {}", info.frame);
    c.text(&font, 18.0, (LEFT + 150) as f32, 24.0, &title, TEXT);
    // Colour bar (dB).
    for py in 0..PLOT_H {
        let t = 1.0 - py as f32 / (PLOT_H - 1) as f32;
        let col = colour(t);
        for x in 0..BAR_W {
            c.set((BAR_X + x) as i64, (TOP + py) as i64, col);
        }
    }
    let step = tick_step(db_max - info.db_floor);
    let mut t = (info.db_floor / step).ceil() * step;
    while t <= db_max {
        let y = TOP as f32
            + (1.0 - (t - info.db_floor) / (db_max - info.db_floor).max(1e-6))
                * (PLOT_H - 1) as f32;
        for dx in 0..5 {
            c.set((BAR_X + BAR_W + dx) as i64, y.round() as i64, TEXT);
        }
        c.text(
            &font,
            13.0,
            (BAR_X + BAR_W + 8) as f32,
            y + 5.0,
            &format!("{t:.0}"),
            TEXT,
        );
        t += step;
    }
    c.text(
        &font,
        16.0,
        BAR_X as f32 - 6.0,
        (TOP - 14) as f32,
        "dB",
        TEXT,
    );
    // Detections.
    for d in info.detections.iter() {
        let (x, y) = pixel(info, d.range_m, d.velocity_mps);
        c.ring(x, y, 7.0, 2.5, MARKER);
        let label = format!("{:.1} m {:+.1} m/s", d.range_m, d.velocity_mps);
        let w = Canvas::text_width(&font, 13.0, &label);
        let lx = if x + 12.0 + w < (LEFT + PLOT_W) as f32 {
            x + 11.0
        } else {
            x - 11.0 - w
        };
        c.rect(
            (lx - 2.0).max(0.0) as usize,
            (y - 12.0).max(0.0) as usize,
            (w + 4.0) as usize,
            16,
            BG,
        );
        c.text(&font, 13.0, lx, y + 1.0, &label, TEXT);
    }
    encode(&c, info)
}

fn encode(c: &Canvas, info: &diag_proto::SnapshotInfo) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, W as u32, H as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let chunks = [
            ("radar:plot", format!("{LEFT} {TOP} {PLOT_W} {PLOT_H}")),
            (
                "radar:range",
                format!(
                    "{} {} {}",
                    info.range_first_m, info.range_step_m, info.range_bins
                ),
            ),
            (
                "radar:velocity",
                format!(
                    "{} {} {}",
                    info.velocity_first_mps, info.velocity_step_mps, info.doppler_bins
                ),
            ),
        ];
        for (k, v) in chunks {
            enc.add_text_chunk(k.to_string(), v)
                .map_err(|e| format!("png: {e}"))?;
        }
        let mut w = enc.write_header().map_err(|e| format!("png: {e}"))?;
        w.write_image_data(&c.px).map_err(|e| format!("png: {e}"))?;
    }
    Ok(out)
}
