import type { MarkerShape, SeriesStyle } from './svg.js';

/**
 * Okabe & Ito's colour-blind-safe palette ("Color Universal Design", 2008), without black and
 * yellow, which are kept for the reference policy and the last resort. `uniform` (the reference
 * every ratio is taken to) is black; our default is vermillion and drawn thicker; oracle is grey.
 */
const OKABE_ITO = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#B8A90F'];
const DASHES = ['6 3', '2 2.5', '9 3 2 3', '4 4', '1.5 3.5', '12 4'];
const MARKERS: MarkerShape[] = ['square', 'triangle', 'diamond', 'down', 'plus', 'cross'];

export const REFERENCE = 'uniform';

/**
 * The published baselines' slots, in the default list's order: each keeps its style in every
 * report, whichever policies run beside it (before, a style followed the list's order, so greso
 * was orange in one report and blue in another).
 */
const BASELINE_SLOTS = ['dapo', 'greso', 'knapsack-rl', 'mopps', 'xrpo'];

/**
 * One style per policy, fixed for the whole report so a policy looks the same in every chart,
 * and a baseline the same in every report (BASELINE_SLOTS); other policies take the slots after
 * those, in order. Beyond the palette, styles repeat colours with the next dash pattern.
 * O(policies).
 */
export function assignStyles(names: readonly string[], defaultPolicy: string | undefined): Map<string, SeriesStyle> {
  const styles = new Map<string, SeriesStyle>();
  let k = BASELINE_SLOTS.length;
  for (const name of names) {
    if (name === REFERENCE) styles.set(name, { color: '#000000', dash: '', marker: 'circle', width: 1.4 });
    else if (name === defaultPolicy) styles.set(name, { color: '#D55E00', dash: '', marker: 'circle', width: 2.2 });
    else if (name === 'oracle') styles.set(name, { color: '#7a7a7a', dash: '3 2', marker: 'cross', width: 1.6 });
    else {
      const fixed = BASELINE_SLOTS.indexOf(name);
      const slot = fixed >= 0 ? fixed : k++;
      styles.set(name, {
        color: OKABE_ITO[slot % OKABE_ITO.length]!,
        dash: DASHES[(slot + Math.floor(slot / OKABE_ITO.length)) % DASHES.length]!,
        marker: MARKERS[slot % MARKERS.length]!,
        width: 1.6,
      });
    }
  }
  return styles;
}

/** The same style drawn solid (small multiples, where each panel holds one policy). */
export function solid(style: SeriesStyle): SeriesStyle {
  return { ...style, dash: '' };
}

/** A light grey reference line (uniform behind another policy's panel). */
export const referenceStyle: SeriesStyle = { color: '#9a9a9a', dash: '', marker: 'circle', width: 1.1 };
