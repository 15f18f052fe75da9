// The capacity beside the dispatcher: the cores the granted jobs held (used), the capacity plan's
// cores for the queries' deadlines (planned) and what a BTU-aware controller following the plan
// leases, with what the leases bill. Python computed every step and tick: this scales and draws.
import { Box, Button, Flex, Heading, Stack, Text } from "@chakra-ui/react";
import { useState } from "react";

import { useApi } from "./api";
import { Figure, Loading } from "./common";
import { clockAfter, coreSeconds, duration } from "./format";
import { usePalette } from "./palette";
import type { CapacityView, CoreStep } from "./types";

const WIDTH = 960;
const LEFT = 44;
const RIGHT = 24;
const TOP = 18;
const RANGES = [1, 6, 24]; // hours up to now
const PLOT = 150;
const AXIS = 22;

export function Capacity() {
  const [hours, setHours] = useState(6);
  const loaded = useApi<CapacityView>(`capacity?hours=${hours}`);
  return (
    <Stack gap={3} data-testid="iqp-capacity">
      <Flex gap={3} align="center">
        <Heading size="md">Capacity</Heading>
        {RANGES.map((h) => (
          <Button
            key={h}
            size="xs"
            variant={h === hours ? "solid" : "outline"}
            onClick={() => setHours(h)}
            data-testid={`iqp-capacity-${h}h`}
          >
            {h} h
          </Button>
        ))}
      </Flex>
      <Loading loaded={loaded}>{(view) => <CapacityBody view={view} />}</Loading>
    </Stack>
  );
}

function CapacityBody({ view }: { view: CapacityView }) {
  const plan = view.plan;
  const drawn = view.grants > 0 || view.planned.length > 0;
  return (
    <Stack gap={3}>
      {view.grants === 0 && (
        <Text color="fg.muted" data-testid="iqp-capacity-no-grants">
          No job held cores since {clockAfter(view.since, 0)} UTC.
        </Text>
      )}
      {plan === null && (
        <Text color="fg.muted" data-testid="iqp-capacity-no-plan">
          No query has recorded its demand yet: nothing is planned or leased.
        </Text>
      )}
      {drawn && <CoreChart view={view} />}
      {drawn && <ChartLegend view={view} />}
      <Flex gap={6} wrap="wrap">
        <Figure label="used" value={coreSeconds(view.used_core_s)} testId="iqp-used-core-s" />
        <Figure label={`billed, leased by a ${duration(view.btu_s)} BTU`} value={coreSeconds(view.billed_core_s)} testId="iqp-billed" />
        <Figure label="billed, the peak held from the first lease" value={coreSeconds(view.fixed_billed_core_s)} testId="iqp-fixed-billed" />
        {plan && (
          <Figure
            label={`plan at ${plan.confidence}: open / after close`}
            value={`${plan.open_cores ?? "—"} / ${plan.closed_cores ?? "—"} cores`}
            testId="iqp-plan-cores"
          />
        )}
        {plan && <Figure label="peak needed by" value={plan.needed_by ?? "(a DAG you cannot read)"} />}
      </Flex>
      <Text fontSize="xs" color="fg.muted">
        {plan ? `Planned for ${plan.queries} quer${plan.queries === 1 ? "y" : "ies"}; speedup: ${plan.speedup}. ` : ""}
        Leased: what a controller following the plan would hold (one core at least while a job runs); a core goes
        only at the end of its paid unit. BTU: {view.btu_source}. Billed: started units × BTU × cores up to now.
      </Text>
    </Stack>
  );
}

function ChartLegend({ view }: { view: CapacityView }) {
  const colors = usePalette();
  const fallback =
    view.default_grants === 0
      ? ""
      : view.default_cores === null
        ? `; ${view.default_grants} named no cores and the connection sets no default: drawn as 1`
        : `; ${view.default_grants} named no cores: drawn at the connection's default, ${view.default_cores}`;
  const items = [
    { key: "used", color: colors["blue.solid"], label: `used: the grants' cores (${view.grants} grants${fallback})` },
    { key: "planned", color: colors["orange.solid"], label: "planned", dash: "5 3" },
    { key: "leased", color: colors["green.solid"], label: "leased" },
  ];
  return (
    <Flex gap={5} wrap="wrap" fontSize="xs" color="fg.muted" data-testid="iqp-capacity-legend">
      {items.map((item) => (
        <Flex key={item.key} gap={1} align="center">
          <svg width="18" height="8" aria-hidden="true">
            <line x1="0" x2="18" y1="4" y2="4" stroke={item.color} strokeWidth="2" strokeDasharray={item.dash} />
          </svg>
          <Text>{item.label}</Text>
        </Flex>
      ))}
    </Flex>
  );
}

function CoreChart({ view }: { view: CapacityView }) {
  const colors = usePalette();
  const top = view.core_ticks[view.core_ticks.length - 1] || 1;
  const height = TOP + PLOT + AXIS;
  const x = (s: number) => LEFT + (Math.min(Math.max(s, 0), view.span_s) / view.span_s) * (WIDTH - LEFT - RIGHT);
  const y = (cores: number) => TOP + PLOT - (cores / top) * PLOT;
  const line = (steps: CoreStep[]) => stepPath(steps, view.span_s, x, y);
  return (
    <Box overflowX="auto" borderWidth="1px" borderColor="border" borderRadius="md" p={2}>
      <svg
        data-testid="iqp-capacity-chart"
        data-span-s={view.span_s}
        viewBox={`0 0 ${WIDTH} ${height}`}
        width="100%"
        role="img"
        aria-label="cores over time"
        style={{ minWidth: 640, fontSize: 11, fontFamily: "inherit" }}
      >
        {view.core_ticks.map((cores) => (
          <g key={`c${cores}`}>
            <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(cores)} y2={y(cores)} stroke={colors.border} />
            <text x={LEFT - 6} y={y(cores) + 4} textAnchor="end" fill={colors["fg.muted"]}>
              {cores}
            </text>
          </g>
        ))}
        {view.ticks_s.map((tick) => (
          <text
            key={`t${tick}`}
            data-testid="iqp-capacity-tick"
            x={x(tick)}
            y={height - 6}
            textAnchor="middle"
            fill={colors["fg.muted"]}
          >
            {clockAfter(view.since, tick)}
          </text>
        ))}
        {view.used.length > 0 && (
          <path
            data-testid="iqp-capacity-used"
            d={`${line(view.used)} V ${y(0)} H ${x(0)} Z`}
            fill={colors["blue.solid"]}
            fillOpacity={0.3}
            stroke={colors["blue.solid"]}
          />
        )}
        {view.leased.length > 0 && (
          <path data-testid="iqp-capacity-leased" d={line(view.leased)} fill="none" stroke={colors["green.solid"]} strokeWidth={3} />
        )}
        {view.planned.length > 0 && (
          <path
            data-testid="iqp-capacity-planned"
            d={line(view.planned)}
            fill="none"
            stroke={colors["orange.solid"]}
            strokeWidth={2}
            strokeDasharray="5 3"
          />
        )}
        <text x={LEFT - 6} y={TOP - 8} textAnchor="end" fill={colors["fg.muted"]}>
          cores
        </text>
      </svg>
    </Box>
  );
}

// A step line: each step's cores from its start to the next step's, the last to the chart's end.
function stepPath(steps: CoreStep[], span: number, x: (s: number) => number, y: (c: number) => number): string {
  const parts = steps.map((s, i) => `${i === 0 ? "M" : "V"} ${i === 0 ? `${x(s.at_s)} ` : ""}${y(s.cores)} H ${x(steps[i + 1]?.at_s ?? span)}`);
  return parts.join(" ");
}
