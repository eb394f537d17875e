//! `radarctl top`: a live view of the unit (ratatui), refreshed from the
//! unit's status pushes and statistics.

use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyModifiers};
use diag_proto::*;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Direction, Layout};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Paragraph, Row, Table};

use crate::client::Client;
use crate::show;

pub fn run(c: &mut Client, period_ms: u32, frames: Option<u64>) -> Result<(), String> {
    let period = Duration::from_millis(u64::from(period_ms.max(100)));
    c.call::<SubscribeEndpoint>(
        &Subscribe {
            status_period_ms: period_ms.max(100),
            telemetry_period_ms: 0,
        },
        "the subscription",
    )
    .map_err(|e| e.to_string())?;
    crossterm::terminal::enable_raw_mode().map_err(|e| format!("terminal: {e}"))?;
    let mut stdout = std::io::stdout();
    crossterm::execute!(stdout, crossterm::terminal::EnterAlternateScreen)
        .map_err(|e| format!("terminal: {e}"))?;
    let result = view(c, period, frames);
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::LeaveAlternateScreen);
    let _ = c.call::<SubscribeEndpoint>(
        &Subscribe {
            status_period_ms: 0,
            telemetry_period_ms: 0,
        },
        "the subscription",
    );
    result
}

fn view(c: &mut Client, period: Duration, frames: Option<u64>) -> Result<(), String> {
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| format!("terminal: {e}"))?;
    let mut status: Option<Status> = None;
    let mut last_stats = Instant::now() - period;
    let mut shown = 0u64;
    loop {
        if let Some(p) = c
            .wait_push(Duration::from_millis(50))
            .map_err(|e| e.to_string())?
            && p.key == StatusTopic::TOPIC_KEY
        {
            status = postcard::from_bytes(&p.body).ok().or(status);
        }
        if last_stats.elapsed() >= period {
            let stats = c
                .call::<StatsEndpoint>(&(), "the statistics request")
                .map_err(|e| e.to_string())?;
            let time = c.time().map_err(|e| e.to_string())?;
            last_stats = Instant::now();
            term.draw(|f| draw(f, status.as_ref(), time.as_ref(), Some(&stats)))
                .map_err(|e| format!("terminal: {e}"))?;
            shown += 1;
            if frames.is_some_and(|n| shown >= n) {
                return Ok(());
            }
        }
        while event::poll(Duration::ZERO).map_err(|e| format!("terminal: {e}"))? {
            if let Event::Key(k) = event::read().map_err(|e| format!("terminal: {e}"))? {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if k.code == KeyCode::Char('q') || k.code == KeyCode::Esc || ctrl_c {
                    return Ok(());
                }
            }
        }
    }
}

fn draw(
    f: &mut ratatui::Frame<'_>,
    status: Option<&Status>,
    time: Option<&TimeStatus>,
    stats: Option<&Stats>,
) {
    let area = f.area();
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(8),
            Constraint::Min(8),
            Constraint::Length(10),
        ])
        .split(area);
    let head = match status {
        Some(s) => vec![
            Line::from(format!(
                "health {} ({})",
                show::health_name(s.health),
                s.health_reason
            )),
            Line::from(format!(
                "frames {}  rate {:.1} Hz  deadline misses {}  uptime {:.0} s",
                s.frames,
                s.frame_rate_hz,
                s.deadline_misses,
                s.uptime_ms as f64 / 1e3
            )),
            Line::from(format!(
                "drops {}",
                s.drops
                    .iter()
                    .map(|d| format!("{} {}", d.reason, d.count))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Line::from(format!(
                "latency last {:.3} ms  max {:.3} ms  loop cpu {:.1} %",
                s.latency_last_us / 1e3,
                s.latency_max_us / 1e3,
                s.loop_cpu_pct
            )),
            Line::from(format!("gpu {}", show::gpu(s.gpu.as_ref()))),
            Line::from(format!("time {}", show::time(time))),
        ],
        None => vec![Line::from("waiting for the unit's first status push ...")],
    };
    f.render_widget(
        Paragraph::new(head).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" radar unit (q quits) "),
        ),
        rows[0],
    );
    if let Some(st) = stats {
        let hist = show::histogram_rows(st);
        let bars: Vec<Bar<'_>> = hist
            .iter()
            .map(|(label, n)| Bar::default().value(*n).label(Line::from(label.clone())))
            .collect();
        let chart = BarChart::default()
            .block(Block::default().borders(Borders::ALL).title(format!(
                " latency: p50 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms ",
                st.latency_p50_us / 1e3,
                st.latency_p99_us / 1e3,
                st.latency_p999_us / 1e3,
                st.latency_max_us / 1e3
            )))
            .direction(Direction::Horizontal)
            .bar_width(1)
            .bar_gap(0)
            .bar_style(Style::default().fg(Color::Cyan))
            .data(BarGroup::default().bars(&bars));
        f.render_widget(chart, rows[1]);
    }
    let det_rows: Vec<Row<'_>> = status
        .map(|s| {
            s.detections
                .iter()
                .map(|d| {
                    Row::new(vec![
                        format!("{:.2}", d.range_m),
                        format!("{:+.2}", d.velocity_mps),
                        format!("{:+.1}", d.azimuth_deg),
                        format!("{:.1}", d.snr_db),
                    ])
                })
                .collect()
        })
        .unwrap_or_default();
    let n = status.map_or(0, |s| s.detections_last);
    let table = Table::new(det_rows, [Constraint::Length(10); 4])
        .header(
            Row::new(vec!["range m", "vel m/s", "az deg", "SNR dB"])
                .style(Style::default().fg(Color::Yellow)),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" newest detections ({n}) ")),
        );
    f.render_widget(table, rows[2]);
}
