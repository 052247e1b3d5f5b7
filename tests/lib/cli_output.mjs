// Readers of the CLI's output (design §12 "CLI output") for the scenario
// tests that check it against the API's JSON (t6200, t6250).
import assert from 'node:assert/strict';

/** Splits an aligned table (ASCII cells) into rows of {TITLE: cell} by the header's column starts. */
export function parseTable(text) {
  const lines = text.replace(/\n$/, '').split('\n');
  const starts = [...lines[0].matchAll(/\S+/g)].map((m) => [m[0], m.index]);
  const rows = lines.slice(1).map((line) => Object.fromEntries(starts.map(([title, at], i) =>
    [title, line.slice(at, i + 1 < starts.length ? starts[i + 1][1] : undefined).trimEnd()])));
  for (const line of lines.slice(1)) {
    for (const [, at] of starts.slice(1)) assert.equal(line[at - 1], ' ', `aligned at ${at}: ${line}`);
  }
  return { titles: starts.map(([t]) => t), rows };
}
/** "key  value" lines of a record block, up to its first blank line. */
export function parseRecord(text) {
  const block = text.split('\n\n')[0];
  return Object.fromEntries(block.split('\n').filter(Boolean).map((l) => /^(\S+)\s*(.*)$/.exec(l).slice(1, 3)));
}

export const REL = /^(just now|\d+ [smhd] ago|in \d+ [smhd])$/;
/** An RFC 3339 time as a table shows it with --utc. */
export const utc = (iso) => iso === null ? '-' : `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
/** A scalar as a cell shows it; objects as compact JSON, null "-". */
export const txt = (v) => v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v);
/** The cell the CLI shows for text: whole up to 48 columns, else 47 and an ellipsis. */
export const cut = (s) => (s.length <= 48 ? s : `${s.slice(0, 47)}…`);
/** The time column: relative by default (checked by form), absolute with --utc (checked exactly). */
export function timeCell(cell, iso, absolute) {
  if (iso === null) return assert.equal(cell, '-');
  if (absolute) return assert.equal(cell, utc(iso));
  assert.match(cell, REL);
}
