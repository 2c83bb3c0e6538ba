import { esc, fx } from './svg.js';

/** The report's chart width in px (fits A4 portrait at print scale). */
export const WIDTH = 960;

/** Where each panel of a small-multiples grid goes, and which panels carry the outer tick labels. */
export interface Grid {
  readonly boxes: readonly { left: number; top: number; width: number; height: number }[];
  /** Total SVG height, room for the x-axis title included. */
  readonly height: number;
  /** The panel has no panel below it: it shows the x tick labels. */
  isBottom(i: number): boolean;
  /** The panel is in the first column: it shows the y tick labels. */
  isLeft(i: number): boolean;
  /** One x-axis title under the grid and one y-axis title beside it. */
  titles(xLabel: string, yLabel: string): string;
}

export interface GridOptions {
  readonly cols: number;
  readonly panelHeight: number;
  /** Space above the first row (legend). */
  readonly top?: number;
  readonly left?: number;
  readonly right?: number;
  readonly gapX?: number;
  /** Vertical space between rows: x tick labels of the row above plus the next panel's title. */
  readonly gapY?: number;
  readonly width?: number;
}

/** Lays `count` panels out in rows of `cols`. O(count). */
export function grid(count: number, o: GridOptions): Grid {
  const width = o.width ?? WIDTH;
  const left = o.left ?? 64;
  const right = o.right ?? 14;
  const top = (o.top ?? 0) + 20;
  const gapX = o.gapX ?? 22;
  const gapY = o.gapY ?? 46;
  const cols = Math.max(1, Math.min(o.cols, Math.max(1, count)));
  const panelWidth = (width - left - right - gapX * (cols - 1)) / cols;
  const rows = Math.ceil(count / cols);
  const boxes = Array.from({ length: count }, (_, i) => ({
    left: left + (i % cols) * (panelWidth + gapX),
    top: top + Math.floor(i / cols) * (o.panelHeight + gapY),
    width: panelWidth,
    height: o.panelHeight,
  }));
  const height = top + rows * o.panelHeight + Math.max(0, rows - 1) * gapY + 44;
  return {
    boxes,
    height,
    isBottom: (i) => i + cols >= count,
    isLeft: (i) => i % cols === 0,
    titles: (xLabel, yLabel) => {
      const gridBottom = top + rows * o.panelHeight + Math.max(0, rows - 1) * gapY;
      const cy = top + (gridBottom - top) / 2;
      return `<text class="label" x="${fx(left + (width - left - right) / 2)}" y="${fx(gridBottom + 36)}" text-anchor="middle">${esc(xLabel)}</text>`
        + `<text class="label" x="16" y="${fx(cy)}" text-anchor="middle" transform="rotate(-90 16 ${fx(cy)})">${esc(yLabel)}</text>`;
    },
  };
}
