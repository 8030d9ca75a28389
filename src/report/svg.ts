// Inline SVG bar charts for the bench report: grouped bars (one group per epoch, one bar per
// series) and stacked bars (shares that add up to 100 %), on a linear or a log axis. The rule: the
// output is a standalone, well-formed <svg> element — every text escaped, every number finite, every
// value also written as text (labels and <title> tooltips), so the chart reads without a script and
// without colour; the root carries data-scale="linear" or "log" so a reader (and a test) can tell.

export interface Series {
  readonly name: string;
  /** One value per category; undefined leaves a gap. */
  readonly values: readonly (number | undefined)[];
  readonly colour: string;
}

export interface BarChartSpec {
  readonly title: string;
  /** Axis label, e.g. "samples/s". */
  readonly unit: string;
  /** Category labels along x (e.g. "epoch 1"). */
  readonly categories: readonly string[];
  readonly series: readonly Series[];
  /** Bars stacked (shares of a whole) instead of side by side. */
  readonly stacked?: boolean;
  /** Upper end of the axis; default: the data's, rounded up to a nice number. Linear axes only. */
  readonly max?: number;
  readonly format?: (v: number) => string;
  /**
   * 'log' puts 100 and 100 000 on one chart without flattening the small one; default 'linear'.
   * Use `scaleFor(values)` to choose. Stacked charts are always linear (shares add up).
   */
  readonly scale?: 'linear' | 'log';
  /** A dashed horizontal line, e.g. the ceiling a simulated training step puts on throughput. */
  readonly reference?: { readonly value: number; readonly label: string };
}

/** Values that span more than this factor get a log axis: on a linear one the small bars vanish. */
export const LOG_SPAN = 10;

/** 'log' when the positive values span more than LOG_SPAN×, else 'linear'. */
export function scaleFor(values: readonly (number | undefined)[]): 'linear' | 'log' {
  const positive = values.filter((v): v is number => v !== undefined && Number.isFinite(v) && v > 0);
  if (positive.length < 2) return 'linear';
  return Math.max(...positive) / Math.min(...positive) > LOG_SPAN ? 'log' : 'linear';
}

/**
 * Ticks of a log axis covering [min, max], from the largest 1, 2 or 5 × 10^k at or below min to the
 * smallest at or above max: every one of them over up to 2.5 decades, else the powers of ten between.
 */
export function logTicks(min: number, max: number): number[] {
  if (!(min > 0) || !(max >= min) || !Number.isFinite(max)) return [1, 10];
  const lo = Math.floor(Math.log10(min));
  const hi = Math.ceil(Math.log10(max)) + (max === min ? 1 : 0);
  const candidates: number[] = [];
  for (let k = lo; k <= hi; k++) for (const m of [1, 2, 5]) candidates.push(round(m * 10 ** k));
  const bottom = Math.max(...candidates.filter((t) => t <= min));
  const top = Math.min(...candidates.filter((t) => t >= max && t > bottom));
  const dense = Math.log10(max / min) <= 2.5;
  return candidates.filter((t) => t >= bottom && t <= top && (dense || t === bottom || t === top || Number.isInteger(Math.log10(t))));
}

const W = 720;
const H = 300;
const M = { top: 48, right: 16, bottom: 64, left: 72 };

/** Escape text for an HTML or SVG text node or a double-quoted attribute. */
export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** Ticks from 0 to a nice upper bound ≥ max: steps of 1, 2 or 5 × 10^k. */
export function niceTicks(max: number, target = 5): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const raw = max / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const ticks: number[] = [];
  for (let v = 0; v < max + step * 1e-9; v += step) ticks.push(round(v));
  if (ticks.at(-1)! < max) ticks.push(round(ticks.at(-1)! + step));
  return ticks;
}

function round(v: number): number {
  return Number(v.toPrecision(12));
}

/** A bar chart as an <svg> element. */
export function barChart(spec: BarChartSpec): string {
  const fmt = spec.format ?? ((v: number) => String(round(v)));
  const n = spec.categories.length;
  const totals = spec.categories.map((_, i) =>
    spec.stacked === true ? spec.series.reduce((s, x) => s + (x.values[i] ?? 0), 0) : Math.max(0, ...spec.series.map((x) => x.values[i] ?? 0)));
  const log = spec.scale === 'log' && spec.stacked !== true;
  const values = spec.series.flatMap((x) => x.values).filter((v): v is number => v !== undefined && Number.isFinite(v) && v > 0);
  const ref = spec.reference !== undefined && Number.isFinite(spec.reference.value) && spec.reference.value > 0 ? spec.reference : undefined;
  const ticks = log
    ? logTicks(Math.min(...values, ref?.value ?? Infinity), Math.max(...values, ref?.value ?? 0))
    : niceTicks(spec.max ?? Math.max(0, ...totals, ref?.value ?? 0));
  const bottom = log ? ticks[0]! : 0;
  const top = ticks.at(-1)!;
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  // On a log axis a bar rises from the lowest tick, not from 0 (log 0 is −∞).
  const y = log
    ? (v: number) => M.top + plotH - ((Math.log10(Math.max(bottom, v)) - Math.log10(bottom)) / (Math.log10(top) - Math.log10(bottom))) * plotH
    : (v: number) => M.top + plotH - (Math.max(0, v) / top) * plotH;
  const slot = plotW / Math.max(1, n);
  const groupW = slot * 0.8;
  const barW = spec.stacked === true ? groupW : groupW / Math.max(1, spec.series.length);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(spec.title)}" data-scale="${log ? 'log' : 'linear'}">`);
  parts.push(`<title>${esc(spec.title)}</title>`);
  parts.push(`<text x="${M.left}" y="22" class="chart-title">${esc(spec.title)}</text>`);
  for (const t of ticks) {
    const ty = f(y(t));
    parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${ty}" y2="${ty}" class="grid"/>`);
    parts.push(`<text x="${M.left - 6}" y="${ty}" class="tick" text-anchor="end" dominant-baseline="middle">${esc(fmt(t))}</text>`);
  }
  parts.push(`<text x="16" y="${f(M.top + plotH / 2)}" class="axis" text-anchor="middle" transform="rotate(-90 16 ${f(M.top + plotH / 2)})">${esc(log ? `${spec.unit} (log scale)` : spec.unit)}</text>`);
  for (let i = 0; i < n; i++) {
    const x0 = M.left + i * slot + (slot - groupW) / 2;
    let base = 0;
    spec.series.forEach((s, k) => {
      const v = s.values[i];
      if (v === undefined || !Number.isFinite(v)) return;
      const x = spec.stacked === true ? x0 : x0 + k * barW;
      const y0 = spec.stacked === true ? base : bottom;
      const y1 = spec.stacked === true ? y0 + Math.max(0, v) : Math.max(0, v);
      base = y1;
      const label = `${s.name}, ${spec.categories[i]}: ${fmt(v)}`;
      parts.push(`<rect x="${f(x)}" y="${f(y(y1))}" width="${f(Math.max(1, barW - 2))}" height="${f(Math.max(0, y(y0) - y(y1)))}" fill="${esc(s.colour)}"><title>${esc(label)}</title></rect>`);
      const room = spec.stacked === true ? y(y0) - y(y1) >= 14 : true;
      if (room && barW >= 22) {
        const ty = spec.stacked === true ? (y(y0) + y(y1)) / 2 : y(y1) - 4;
        parts.push(`<text x="${f(x + (barW - 2) / 2)}" y="${f(ty)}" class="value${spec.stacked === true ? ' inside' : ''}" text-anchor="middle"${spec.stacked === true ? ' dominant-baseline="middle"' : ''}>${esc(fmt(v))}</text>`);
      }
    });
    parts.push(`<text x="${f(x0 + groupW / 2)}" y="${H - M.bottom + 18}" class="tick" text-anchor="middle">${esc(spec.categories[i]!)}</text>`);
  }
  parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${f(y(bottom))}" y2="${f(y(bottom))}" class="axis-line"/>`);
  if (ref !== undefined) {
    const ry = f(y(ref.value));
    parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${ry}" y2="${ry}" class="reference" stroke-dasharray="6 4"><title>${esc(`${ref.label}: ${fmt(ref.value)}`)}</title></line>`);
    parts.push(`<text x="${W - M.right - 4}" y="${f(Number(ry) - 5)}" class="reference-label" text-anchor="end">${esc(`${ref.label}: ${fmt(ref.value)}`)}</text>`);
  }
  let lx = M.left;
  for (const s of spec.series) {
    parts.push(`<rect x="${lx}" y="${H - 22}" width="12" height="12" fill="${esc(s.colour)}"/>`);
    parts.push(`<text x="${lx + 16}" y="${H - 12}" class="legend">${esc(s.name)}</text>`);
    lx += 28 + s.name.length * 7;
  }
  parts.push('</svg>');
  return parts.join('\n');
}

/** A coordinate with at most one decimal. */
function f(v: number): string {
  if (!Number.isFinite(v)) throw new RangeError(`svg: non-finite coordinate ${v}`);
  return String(Math.round(v * 10) / 10);
}
