/**
 * SVG drawing primitives for the report: escaping, nice ticks, linear scales, a plot frame with
 * gridlines and labelled axes, and marks. Every drawn data element carries `data-mark`, so the
 * page's check script (html.ts) and the rendering test can count what was drawn.
 */

export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A coordinate with one decimal (SVG needs no more at these sizes). */
export const fx = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '0');

/**
 * A "nice" step near `raw`: 1, 2, 2.5 or 5 × 10^k, the nearest by Heckbert's thresholds
 * ("Nice numbers for graph labels", Graphics Gems 1990, with 2.5 added). Domain: raw > 0. O(1).
 */
export function niceStep(raw: number): number {
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 2.25 ? 2 : f < 3.5 ? 2.5 : f < 7.5 ? 5 : 10) * mag;
}

/**
 * Ticks at multiples of a nice step covering [lo, hi], about `count` intervals. Domain: finite
 * lo ≤ hi; a zero-width domain gets one tick. O(count).
 */
/**
 * The step axis's domain for steps `xs` (ascending): first to last; one step gets half a step
 * either side, so its marker sits mid-panel above its tick (it sat on the y axis, the axis
 * running on to the next step as if there were one).
 */
export function stepDomain(xs: readonly number[]): [number, number] {
  const first = xs[0] ?? 0;
  const last = xs.at(-1) ?? first;
  return last > first ? [first, last] : [first - 0.5, first + 0.5];
}

/**
 * Ticks for a step axis: whole steps only. A short run's axis (one step: 0 to 1) had ticks at
 * 0.2, 0.4, ..., each written as a whole step: "0 0 0 1 1 1".
 */
export function stepTicks(lo: number, hi: number, count: number): number[] {
  const ticks = niceTicks(lo, hi, count).filter((v) => Number.isInteger(v));
  return ticks.length >= 2 ? ticks : [...new Set([Math.ceil(lo), Math.floor(hi)])];
}

export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (hi <= lo) return [lo];
  const step = niceStep((hi - lo) / Math.max(1, count));
  const first = Math.ceil(lo / step - 1e-9);
  const last = Math.floor(hi / step + 1e-9);
  const out: number[] = [];
  for (let k = first; k <= last; k++) out.push(Number((k * step).toPrecision(12)));
  return out;
}

/**
 * An axis from 0 (or a negative `min`) to just past `max`: nice ticks about `count` apart, the
 * domain ending on the first tick at or beyond each end (so the plot uses its height). O(count).
 */
export function niceDomain(max: number, count = 5, min = 0): { lo: number; hi: number; ticks: number[]; step: number } {
  const top = Math.max(max, 1e-9);
  const bottom = Math.min(min, 0);
  const step = niceStep((top - bottom) / Math.max(1, count));
  const hi = Math.max(step, Math.ceil(top / step - 1e-9) * step);
  const lo = Math.floor(bottom / step + 1e-9) * step;
  return { lo, hi, ticks: niceTicks(lo, hi, Math.round((hi - lo) / step)), step };
}

/** The smallest "nice" number ≥ v (1, 2, 2.5, 5 × 10^k): a round top for an axis. */
export function niceCeil(v: number): number {
  if (!(v > 0)) return 1;
  const mag = 10 ** Math.floor(Math.log10(v));
  return ([1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= v * (1 - 1e-12)) ?? 10 * mag);
}

/** Tick labels: thousands separated, k/M for large values, at most the digits the step needs. */
export function tickLabel(v: number, step: number): string {
  const a = Math.abs(v);
  if (a >= 1e6 && step >= 1e5) return `${trim(v / 1e6, step / 1e6)}M`;
  if (a >= 1e4 && step >= 1e3) return `${trim(v / 1e3, step / 1e3)}k`;
  return trim(v, step);
}

/** The fewest decimals (≤ 4) that write every multiple of `step` exactly. */
export function decimalsFor(step: number): number {
  if (!(step > 0)) return 0;
  for (let d = 0; d < 4; d++) if (Math.abs(step * 10 ** d - Math.round(step * 10 ** d)) < 1e-6) return d;
  return 4;
}

function trim(v: number, step: number): string {
  return v.toFixed(decimalsFor(step));
}

/** A share as a percentage with the decimals its tick step needs (0.025 → "2.5%"). */
export const percent = (v: number, step: number): string => `${(v * 100).toFixed(decimalsFor(step * 100))}%`;

/** A plot area inside an SVG: data domains mapped onto a pixel box (y grows upwards). */
export class Frame {
  constructor(
    readonly left: number,
    readonly top: number,
    readonly width: number,
    readonly height: number,
    readonly xDomain: readonly [number, number],
    readonly yDomain: readonly [number, number],
  ) {}

  sx(v: number): number {
    const [a, b] = this.xDomain;
    return this.left + (b === a ? 0.5 : (v - a) / (b - a)) * this.width;
  }

  sy(v: number): number {
    const [a, b] = this.yDomain;
    return this.top + this.height - (b === a ? 0.5 : (v - a) / (b - a)) * this.height;
  }

  get bottom(): number {
    return this.top + this.height;
  }

  get right(): number {
    return this.left + this.width;
  }
}

export interface AxisSpec {
  readonly ticks: readonly number[];
  readonly format: (v: number) => string;
  /** Axis title; omitted in inner panels of small multiples. */
  readonly label?: string;
  /** Draw the tick labels (off for inner panels that share an axis). */
  readonly labels?: boolean;
}

/** X tick labels this long or longer (half of them wider than the grid's 14 px right margin) end at the frame's right edge. */
const END_ANCHORED_CHARS = 5;

/** Gridlines, the axis lines, tick marks, tick labels and axis titles of a frame. */
export function axes(f: Frame, x: AxisSpec, y: AxisSpec): string {
  const out: string[] = [];
  for (const t of y.ticks) {
    const py = fx(f.sy(t));
    out.push(`<line class="grid" x1="${fx(f.left)}" y1="${py}" x2="${fx(f.right)}" y2="${py}"/>`);
    if (y.labels !== false) out.push(`<text class="tick" x="${fx(f.left - 5)}" y="${fx(f.sy(t) + 3.5)}" text-anchor="end">${esc(y.format(t))}</text>`);
  }
  for (const t of x.ticks) {
    const px = fx(f.sx(t));
    out.push(`<line class="grid" x1="${px}" y1="${fx(f.top)}" x2="${px}" y2="${fx(f.bottom)}"/>`);
    out.push(`<line class="axis" x1="${px}" y1="${fx(f.bottom)}" x2="${px}" y2="${fx(f.bottom + 4)}"/>`);
    if (x.labels === false) continue;
    const text = x.format(t);
    // A long label on the frame's right edge ends there: centred, the last panel's "15.0M" ran
    // past the page's margin and was cut.
    const last = text.length >= END_ANCHORED_CHARS && Math.abs(f.sx(t) - f.right) < 0.5;
    out.push(`<text class="tick" x="${last ? fx(f.right + 2) : px}" y="${fx(f.bottom + 15)}" text-anchor="${last ? 'end' : 'middle'}">${esc(text)}</text>`);
  }
  out.push(`<line class="axis" x1="${fx(f.left)}" y1="${fx(f.bottom)}" x2="${fx(f.right)}" y2="${fx(f.bottom)}"/>`);
  out.push(`<line class="axis" x1="${fx(f.left)}" y1="${fx(f.top)}" x2="${fx(f.left)}" y2="${fx(f.bottom)}"/>`);
  if (x.label !== undefined) out.push(`<text class="label" x="${fx(f.left + f.width / 2)}" y="${fx(f.bottom + 32)}" text-anchor="middle">${esc(x.label)}</text>`);
  if (y.label !== undefined) {
    const cx = f.left - 44;
    const cy = f.top + f.height / 2;
    out.push(`<text class="label" x="${fx(cx)}" y="${fx(cy)}" text-anchor="middle" transform="rotate(-90 ${fx(cx)} ${fx(cy)})">${esc(y.label)}</text>`);
  }
  return out.join('');
}

/** A panel title above the frame (small multiples). */
export function panelTitle(f: Frame, title: string, bold = false): string {
  return `<text class="ptitle${bold ? ' strong' : ''}" x="${fx(f.left)}" y="${fx(f.top - 6)}">${esc(title)}</text>`;
}

/** One visual identity per series: colour, dash pattern, marker shape, line width. */
export interface SeriesStyle {
  readonly color: string;
  readonly dash: string;
  readonly marker: MarkerShape;
  readonly width: number;
}

export type MarkerShape = 'circle' | 'square' | 'triangle' | 'diamond' | 'down' | 'plus' | 'cross';

/** A marker centred at (x, y); `hollow` draws the outline only. */
export function marker(shape: MarkerShape, x: number, y: number, color: string, size = 3.5, hollow = false, title?: string): string {
  const fill = hollow ? 'white' : color;
  const tip = title === undefined ? '' : `<title>${esc(title)}</title>`;
  const attrs = `data-mark="1" fill="${fill}" stroke="${color}" stroke-width="1.3"`;
  const strokeOnly = `data-mark="1" fill="none" stroke="${color}" stroke-width="2"`;
  const s = size;
  const poly = (pts: [number, number][]) => `<polygon ${attrs} points="${pts.map(([a, b]) => `${fx(x + a)},${fx(y + b)}`).join(' ')}">${tip}</polygon>`;
  switch (shape) {
    case 'circle':
      return `<circle ${attrs} cx="${fx(x)}" cy="${fx(y)}" r="${fx(s)}">${tip}</circle>`;
    case 'square':
      return `<rect ${attrs} x="${fx(x - s * 0.9)}" y="${fx(y - s * 0.9)}" width="${fx(s * 1.8)}" height="${fx(s * 1.8)}">${tip}</rect>`;
    case 'triangle':
      return poly([[0, -s * 1.15], [s * 1.1, s * 0.8], [-s * 1.1, s * 0.8]]);
    case 'down':
      return poly([[0, s * 1.15], [s * 1.1, -s * 0.8], [-s * 1.1, -s * 0.8]]);
    case 'diamond':
      return poly([[0, -s * 1.25], [s * 1.1, 0], [0, s * 1.25], [-s * 1.1, 0]]);
    case 'plus':
      return `<path ${strokeOnly} d="M${fx(x - s)} ${fx(y)}L${fx(x + s)} ${fx(y)}M${fx(x)} ${fx(y - s)}L${fx(x)} ${fx(y + s)}">${tip}</path>`;
    case 'cross':
      return `<path ${strokeOnly} d="M${fx(x - s)} ${fx(y - s)}L${fx(x + s)} ${fx(y + s)}M${fx(x - s)} ${fx(y + s)}L${fx(x + s)} ${fx(y - s)}">${tip}</path>`;
  }
}

/** A polyline through the finite points (a gap breaks the line). */
export function line(points: readonly (readonly [number, number] | null)[], style: SeriesStyle, extra = ''): string {
  const runs: string[][] = [[]];
  for (const p of points) {
    if (p === null || !Number.isFinite(p[0]) || !Number.isFinite(p[1])) {
      if (runs.at(-1)!.length > 0) runs.push([]);
      continue;
    }
    runs.at(-1)!.push(`${fx(p[0])},${fx(p[1])}`);
  }
  const dash = style.dash === '' ? '' : ` stroke-dasharray="${style.dash}"`;
  return runs
    .filter((r) => r.length > 1)
    .map((r) => `<polyline data-mark="1" fill="none" stroke="${style.color}" stroke-width="${style.width}"${dash} stroke-linejoin="round" points="${r.join(' ')}"${extra}/>`)
    .join('');
}

/** A filled band between two curves sampled at the same x positions (min–max across seeds). */
export function band(xs: readonly number[], lo: readonly number[], hi: readonly number[], color: string, opacity = 0.22): string {
  if (xs.length < 2) return '';
  const top = xs.map((x, i) => `${fx(x)},${fx(hi[i]!)}`);
  const bottom = xs.map((x, i) => `${fx(x)},${fx(lo[i]!)}`).reverse();
  return `<polygon data-mark="1" class="band" fill="${color}" fill-opacity="${opacity}" stroke="none" points="${[...top, ...bottom].join(' ')}"/>`;
}

/** A legend entry: a short line with the series' dash and marker, then the name. */
export function legendItem(x: number, y: number, name: string, style: SeriesStyle, withLine = true, withMarker = true): string {
  const dash = style.dash === '' ? '' : ` stroke-dasharray="${style.dash}"`;
  const stroke = withLine ? `<line x1="${fx(x)}" y1="${fx(y)}" x2="${fx(x + 26)}" y2="${fx(y)}" stroke="${style.color}" stroke-width="${style.width}"${dash}/>` : '';
  const mark = withMarker ? marker(style.marker, x + 13, y, style.color, 3.5).replace('data-mark="1" ', '') : '';
  return `<g class="legend">${stroke}${mark}<text class="tick" x="${fx(x + 32)}" y="${fx(y + 3.5)}">${esc(name)}</text></g>`;
}

/**
 * A row (wrapping) of legend entries, starting at (x, y), within `width`. Returns the markup and
 * the height used. Only the series given are listed: callers pass what they drew.
 */
export function legendRow(x: number, y: number, width: number, items: readonly { name: string; style: SeriesStyle; line?: boolean; marker?: boolean }[]): { svg: string; height: number } {
  const out: string[] = [];
  let cx = x;
  let cy = y;
  for (const it of items) {
    const w = 42 + it.name.length * 6.6;
    if (cx + w > x + width && cx > x) {
      cx = x;
      cy += 18;
    }
    out.push(legendItem(cx, cy, it.name, it.style, it.line ?? true, it.marker ?? true));
    cx += w + 10;
  }
  return { svg: out.join(''), height: items.length === 0 ? 0 : cy - y + 18 };
}

/** A chart: a numbered figure with a title, a caption, and one SVG of class `chart`. */
export function figure(id: string, title: string, caption: string, width: number, height: number, body: string): string {
  return `<figure id="fig-${id.replace(/^chart-/, '')}"><figcaption><span class="ftitle">${esc(title)}</span> ${caption}</figcaption>`
    + `<svg class="chart" id="${id}" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${fx(height)}" viewBox="0 0 ${width} ${fx(height)}" role="img" aria-label="${esc(title)}">${body}</svg></figure>`;
}
