// A window's chart: one row per batch (and per slot still waiting) plus the merge. Planned bars
// are dashed outlines over the actual bars; ticks mark each batch's release and latest start;
// hatched segments are waits for the resource. Python computed every number (seconds from the
// window start, the axis and its ticks): this only scales and draws.
import { Box } from "@chakra-ui/react";

import { duration } from "./format";
import { statusToken, usePalette } from "./palette";
import type { Bar, WindowDetail } from "./types";

const WIDTH = 960;
const LABEL = 96;
const AXIS = 26;
const ROW = 30;
const RIGHT = 12;
const LABEL_ROW = 12; // a mark's label drops a row when it would overlap the one before it
const LABEL_GAP = 64;

export function Gantt({ detail }: { detail: WindowDetail }) {
  const colors = usePalette();
  const { axis, marks, bars } = detail;
  const plot = WIDTH - LABEL - RIGHT;
  const height = AXIS + ROW * bars.length + 22 + LABEL_ROW;
  const x = (s: number) => LABEL + (Math.min(Math.max(s, 0), axis.span_s) / axis.span_s) * plot;
  const lines: { key: string; at: number | null; color: string; dash?: string; label: string }[] = [
    { key: "window-end", at: marks.window_end_s, color: colors["fg.muted"], dash: "4 3", label: "window end" },
    { key: "deadline", at: marks.deadline_s, color: colors["fg.error"], label: "deadline" },
    { key: "predicted", at: marks.predicted_finish_s, color: colors["orange.solid"], dash: "2 3", label: "predicted" },
    { key: "finish", at: marks.actual_finish_s, color: colors["green.solid"], label: "finish" },
    { key: "now", at: marks.now_s, color: colors["blue.solid"], dash: "1 2", label: "now" },
  ];
  const labelRow = labelRows(lines.map(({ key, at }) => ({ key, x: at === null ? null : x(at) })));
  return (
    <Box overflowX="auto" borderWidth="1px" borderColor="border" borderRadius="md" p={2}>
      <svg
        data-testid="iqp-gantt"
        viewBox={`0 0 ${WIDTH} ${height}`}
        width="100%"
        role="img"
        aria-label="window chart"
        style={{ minWidth: 640, fontSize: 11, fontFamily: "inherit" }}
      >
        <defs>
          <pattern id="iqp-wait" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
            <rect width="6" height="6" fill={colors["bg.muted"]} />
            <line x1="0" y1="0" x2="0" y2="6" stroke={colors["orange.solid"]} strokeWidth="2" />
          </pattern>
        </defs>
        {axis.ticks_s.map((tick) => (
          <g key={tick}>
            <line x1={x(tick)} x2={x(tick)} y1={AXIS - 6} y2={height - 18 - LABEL_ROW} stroke={colors.border} />
            <text x={x(tick)} y={AXIS - 10} textAnchor="middle" fill={colors["fg.muted"]}>
              {duration(tick)}
            </text>
          </g>
        ))}
        {bars.map((bar, row) => (
          <BarRow key={`${bar.label}-${row}`} bar={bar} top={AXIS + row * ROW} x={x} now={marks.now_s} />
        ))}
        {lines.map(({ key, at, color, dash, label }) =>
          at === null ? null : (
            <g key={key} data-testid={`iqp-mark-${key}`} data-seconds={at}>
              <line
                x1={x(at)}
                x2={x(at)}
                y1={AXIS - 4}
                y2={height - 16 - LABEL_ROW}
                stroke={color}
                strokeWidth={key === "deadline" ? 2 : 1.5}
                strokeDasharray={dash}
              />
              <text x={x(at)} y={height - 4 - LABEL_ROW * (1 - (labelRow[key] ?? 0))} textAnchor="middle" fill={color}>
                {label}
              </text>
              <title>{`${label}: ${duration(at)} after the window start`}</title>
            </g>
          ),
        )}
      </svg>
    </Box>
  );
}

// Left to right, each label on the first of two rows where it clears the label before it.
function labelRows(marks: { key: string; x: number | null }[]): Record<string, number> {
  const rows: Record<string, number> = {};
  const last = [-Infinity, -Infinity];
  for (const { key, x } of marks.filter((m) => m.x !== null).sort((a, b) => (a.x ?? 0) - (b.x ?? 0))) {
    const row = x! - last[0] >= LABEL_GAP ? 0 : 1;
    rows[key] = row;
    last[row] = x!;
  }
  return rows;
}

function BarRow({ bar, top, x, now }: { bar: Bar; top: number; x: (s: number) => number; now: number | null }) {
  const colors = usePalette();
  const mid = top + ROW / 2;
  const actualEnd = bar.actual_end_s ?? (bar.status === "running" ? now : null);
  return (
    <g data-testid="iqp-row" data-label={bar.label}>
      <text x={LABEL - 8} y={mid + 4} textAnchor="end" fill={colors.fg}>
        {bar.label}
      </text>
      {bar.waits.map((wait) => {
        const end = wait.granted_s ?? wait.released_s ?? now;
        return end === null ? null : (
          <rect
            key={wait.request}
            data-testid="iqp-wait"
            x={x(wait.registered_s)}
            y={mid - 5}
            width={Math.max(x(end) - x(wait.registered_s), 1)}
            height={10}
            fill="url(#iqp-wait)"
          >
            <title>{`waited ${duration(wait.waited_s)} for the resource (${wait.state})`}</title>
          </rect>
        );
      })}
      {bar.actual_start_s !== null && actualEnd !== null && (
        <rect
          data-testid="iqp-bar-actual"
          x={x(bar.actual_start_s)}
          y={mid - 5}
          width={Math.max(x(actualEnd) - x(bar.actual_start_s), 2)}
          height={10}
          rx={2}
          fill={colors[statusToken(bar.status)]}
        >
          <title>{`${bar.label} ran ${duration(bar.actual_cost_s)} (${bar.status})`}</title>
        </rect>
      )}
      {bar.planned_start_s !== null && bar.planned_end_s !== null && (
        <rect
          data-testid="iqp-bar-planned"
          x={x(bar.planned_start_s)}
          y={mid - 9}
          width={Math.max(x(bar.planned_end_s) - x(bar.planned_start_s), 2)}
          height={18}
          fill="none"
          stroke={colors["fg.muted"]}
          strokeDasharray="3 2"
        >
          <title>{`${bar.label} planned ${duration(bar.predicted_cost_s)}`}</title>
        </rect>
      )}
      {bar.release_s !== null && (
        <path d={`M ${x(bar.release_s)} ${mid - 11} v 22`} stroke={colors["blue.solid"]} strokeWidth={1.5}>
          <title>{`released at ${duration(bar.release_s)}`}</title>
        </path>
      )}
      {bar.latest_start_s !== null && (
        <path d={`M ${x(bar.latest_start_s)} ${mid - 11} l 4 -4 h -8 z`} fill={colors["orange.solid"]}>
          <title>{`latest start ${duration(bar.latest_start_s)}`}</title>
        </path>
      )}
    </g>
  );
}
