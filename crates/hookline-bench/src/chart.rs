//! The SVG chart of `hookline-bench all`: deliveries/s and p50/p99 latency per scenario,
//! drawn with plotters' SVG backend (text is written as SVG `<text>`: no font library).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::results::Results;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 760;

/// The chart as an SVG document.
pub fn svg(results: &Results) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, results).map_err(|error| anyhow::anyhow!("drawing the chart: {error}"))?;
        root.present()
            .map_err(|error| anyhow::anyhow!("drawing the chart: {error}"))?;
    }
    anyhow::ensure!(out.starts_with("<svg"), "the chart is not SVG");
    Ok(out)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(root: &DrawingArea<SVGBackend<'_>, Shift>, results: &Results) -> DrawResult {
    root.fill(&WHITE)?;
    let title = format!(
        "hookline-bench all{} — {} CPUs, {}",
        if results.sizes.quick { " --quick" } else { "" },
        results.machine.nproc,
        results.date
    );
    let root = root.titled(&title, ("sans-serif", 18))?;
    let (top, bottom) = root.split_vertically(HEIGHT / 2 - 20);
    let names: Vec<&str> = results
        .scenarios
        .iter()
        .map(|s| s.scenario.as_str())
        .collect();
    let n = names.len().max(1) as u32;
    let label = |x: &SegmentValue<u32>| match x {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => names
            .get(*i as usize)
            .map_or_else(String::new, |name| (*name).to_owned()),
        SegmentValue::Last => String::new(),
    };

    let throughput: Vec<f64> = results
        .scenarios
        .iter()
        .map(|s| finite(s.deliveries_per_s))
        .collect();
    let top_max = throughput.iter().copied().fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&top)
        .caption("deliveries/s", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n).into_segmented(), 0.0..top_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize)
        .x_label_formatter(&label)
        .draw()?;
    chart.draw_series(throughput.iter().enumerate().map(|(i, value)| {
        let i = i as u32;
        Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), *value),
            ],
            BLUE.mix(0.7).filled(),
        )
    }))?;

    // Latency spans orders of magnitude (ms to s): a log scale, floored at 0.1 ms.
    let p50: Vec<f64> = results
        .scenarios
        .iter()
        .map(|s| finite(s.latency.p50_ms).max(0.1))
        .collect();
    let p99: Vec<f64> = results
        .scenarios
        .iter()
        .map(|s| finite(s.latency.p99_ms).max(0.1))
        .collect();
    let bottom_max = p99.iter().chain(&p50).copied().fold(1.0, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "latency publish → 2xx, ms (log): p50 and p99",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n).into_segmented(), (0.1..bottom_max).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize)
        .x_label_formatter(&label)
        .draw()?;
    let bars = |values: Vec<f64>, color: RGBColor| {
        values.into_iter().enumerate().map(move |(i, value)| {
            let i = i as u32;
            Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.1),
                    (SegmentValue::Exact(i + 1), value),
                ],
                color.mix(0.6).filled(),
            )
        })
    };
    chart
        .draw_series(bars(p99, RED))?
        .label("p99")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], RED.mix(0.6).filled()));
    chart
        .draw_series(bars(p50, GREEN))?
        .label("p50")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], GREEN.mix(0.6).filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// NaN and infinities (a scenario that measured nothing) as 0.
fn finite(value: f64) -> f64 {
    if value.is_finite() { value } else { 0.0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_every_scenario_into_an_svg() {
        let results = crate::results::tests::results(false);
        let svg = super::svg(&results).expect("svg");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for name in [
            "ceiling",
            "forwarder",
            "pipeline",
            "many",
            "isolation",
            "retry",
            "deliveries/s",
            "p99",
        ] {
            assert!(svg.contains(name), "{name} missing");
        }
        // One throughput bar and two latency bars per scenario, besides the background.
        assert!(svg.matches("<rect").count() > 3 * results.scenarios.len());
    }
}
