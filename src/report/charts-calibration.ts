import type { CalibrationBin } from '../replay/metrics.js';
import { asView, type ChartInput } from './series.js';
import { Frame, axes, esc, figure, fx, legendItem, line, marker } from './svg.js';

/** Calibration bins pooled over seeds: counts summed, means weighted by count. O(seeds · bins). */
export function pooledCalibration(all: readonly (readonly CalibrationBin[])[]): CalibrationBin[] {
  const first = all[0] ?? [];
  return first.map((bin, b) => {
    let count = 0;
    let predicted = 0;
    let realised = 0;
    for (const bins of all) {
      const x = bins[b];
      if (x === undefined || x.count === 0) continue;
      count += x.count;
      predicted += x.predicted * x.count;
      realised += x.realised * x.count;
    }
    return { lo: bin.lo, hi: bin.hi, count, predicted: count > 0 ? predicted / count : 0, realised: count > 0 ? realised / count : 0 };
  });
}

/**
 * Calibration: mean realised group pass rate against mean predicted, per decile of prediction,
 * for the policies that predict a pass rate; the others are named in the caption, not drawn.
 */
export function calibrationChart(input: ChartInput): string {
  const view = asView(input);
  const predicting = view.names.filter((n) => view.of(n).some((r) => r.totals.predictions > 0));
  const silent = view.names.filter((n) => !predicting.includes(n));
  const f = new Frame(80, 20, 380, 300, [0, 1], [0, 1]);
  const ticks = [0, 0.2, 0.4, 0.6, 0.8, 1];
  const diag = `<line class="ref" x1="${fx(f.sx(0))}" y1="${fx(f.sy(0))}" x2="${fx(f.sx(1))}" y2="${fx(f.sy(1))}"/>`;
  const marks = predicting.map((name) => {
    const style = view.styles.get(name)!;
    const bins = pooledCalibration(view.of(name).map((r) => r.calibration)).filter((b) => b.count > 0);
    const pts = bins.map((b) => [f.sx(b.predicted), f.sy(b.realised)] as const);
    return `<g class="panel" data-panel="${esc(name)}">${line(pts, { ...style, width: Math.min(style.width, 1.6) })}${bins.map((b, j) => marker(style.marker, pts[j]![0], pts[j]![1], style.color, 3.6, false, `${name}: ${b.count} groups, predicted ${b.predicted.toFixed(3)}, realised ${b.realised.toFixed(3)}`)).join('')}</g>`;
  });
  const legend = predicting.map((name, k) => legendItem(f.right + 40, f.top + 10 + k * 20, name === view.defaultPolicy ? `${name} (our default)` : name, view.styles.get(name)!)).join('')
    + legendItem(f.right + 40, f.top + 10 + predicting.length * 20, 'perfectly calibrated', { color: '#444', dash: '1.5 2.5', marker: 'circle', width: 1 }, true, false);
  const caption = silent.length === 0
    ? 'Groups binned by the pass rate the policy predicted for them (tenths); each marker is a bin: mean prediction against the mean realised pass rate.'
    : `Groups binned by the pass rate the policy predicted for them (tenths); each marker is a bin: mean prediction against the mean realised pass rate. Not drawn, as they predict no pass rate: ${silent.map(esc).join(', ')}.`;
  return figure(
    'chart-calibration',
    'Calibration of the predicted pass rate',
    `${caption}${view.runs.length > 1 ? ` Pooled over ${view.runs.length} seeds.` : ''}`,
    660, 370,
    axes(f, { ticks, format: (v) => v.toFixed(1), label: 'predicted pass rate' }, { ticks, format: (v) => v.toFixed(1), label: 'realised pass rate of the group' }) + diag + marks.join('') + legend,
  );
}
