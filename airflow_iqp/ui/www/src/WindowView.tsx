// One window: its numbers, its chart, and a table of its batches (tuples, costs, waits and
// the files each batch froze).
import { Box, Flex, Heading, Link, Stack, Table, Text } from "@chakra-ui/react";
import { Link as RouterLink } from "react-router-dom";

import { ColumnHeaders, Figure, OutcomeBadge, StatusBadge } from "./common";
import { count, duration, ratio, time } from "./format";
import { Gantt } from "./Gantt";
import type { Bar, WindowDetail } from "./types";

export function WindowView({ detail, runLink = false }: { detail: WindowDetail; runLink?: boolean }) {
  const w = detail.window;
  return (
    <Stack gap={4} data-testid="iqp-window" data-window-id={w.id}>
      <Flex gap={3} align="center" wrap="wrap">
        <Heading size="md">
          {w.dag_id}: window {time(w.window_start)}
        </Heading>
        <OutcomeBadge outcome={w.outcome} />
        <StatusBadge status={w.status} />
        {runLink && w.run_id && (
          <Link asChild colorPalette="blue" fontSize="sm">
            <RouterLink to={`/dags/${encodeURIComponent(w.dag_id)}/runs/${encodeURIComponent(w.run_id)}/plugin/iqp-window`}>
              open the run
            </RouterLink>
          </Link>
        )}
      </Flex>
      <Flex gap={6} wrap="wrap">
        <Figure label="deadline" value={time(w.deadline)} testId="iqp-deadline" />
        <Figure label="finished" value={time(w.actual_finish)} testId="iqp-finish" />
        <Figure label="predicted finish" value={time(w.predicted_finish)} testId="iqp-predicted" />
        {w.predicted_late_s !== null && w.predicted_late_s > 0 && (
          <Figure label="predicted late by" value={duration(w.predicted_late_s)} testId="iqp-predicted-late" />
        )}
        <Figure label="laxity" value={duration(w.laxity_s)} testId="iqp-laxity" />
        <Figure label="cost" value={duration(w.cost_s)} testId="iqp-cost" />
        <Figure label="one batch" value={duration(w.single_batch_cost_s)} testId="iqp-single" />
        {w.single_batch_low_s !== null && w.single_batch_high_s !== null && w.single_batch_high_s > w.single_batch_low_s && (
          <Figure
            label={`one batch, 95% (${w.cost_model} model)`}
            value={`${duration(w.single_batch_low_s)} – ${duration(w.single_batch_high_s)}`}
            testId="iqp-single-interval"
          />
        )}
        <Figure label="cost ratio" value={ratio(w.cost_ratio)} testId="iqp-ratio" />
        <Figure label="tuples" value={`${count(w.actual_tuples)} / ${count(w.expected_tuples)} expected`} />
        {w.late_files > 0 && <Figure label="late files" value={w.late_files} />}
        {w.incomplete && <Figure label="result" value="incomplete" />}
      </Flex>
      <Gantt detail={detail} />
      <Legend />
      <BatchTable bars={detail.bars} unit={w.unit} />
    </Stack>
  );
}

function Legend() {
  return (
    <Text fontSize="xs" color="fg.muted">
      Dashed box: planned start and cost. Filled bar: as run. Hatched: waiting for the resource. Blue tick:
      release; orange triangle: latest start. Predicted finish: what is left of the window, run behind the job
      holding the resource and the jobs the policy serves first, priced by the cost model this DAG's plans use
      (its declared file's, or learned from its jobs) with its 90% margin (the plan's costs until there is one).
    </Text>
  );
}

function BatchTable({ bars, unit }: { bars: Bar[]; unit: string }) {
  return (
    <Table.Root size="sm" data-testid="iqp-batches">
      <ColumnHeaders names={["job", "status", "reason", "planned start", "started", "waited", `planned (${unit})`, "tuples", "predicted cost", "cost", "attempts", "files frozen"]} />
      <Table.Body>
        {bars.map((bar, i) => (
          <Table.Row key={`${bar.label}-${i}`} data-testid="iqp-batch" data-label={bar.label}>
            <Table.Cell>{bar.label}</Table.Cell>
            <Table.Cell>
              <StatusBadge status={bar.status} />
            </Table.Cell>
            <Table.Cell>{bar.reason ?? ""}</Table.Cell>
            <Table.Cell>{duration(bar.planned_start_s)}</Table.Cell>
            <Table.Cell>{duration(bar.actual_start_s)}</Table.Cell>
            <Table.Cell>
              {bar.waits.length === 0 ? "—" : duration(bar.waits.reduce((sum, w) => sum + w.waited_s, 0))}
            </Table.Cell>
            <Table.Cell>{count(bar.planned_size)}</Table.Cell>
            <Table.Cell data-testid="iqp-batch-tuples">{count(bar.actual_tuples)}</Table.Cell>
            <Table.Cell>{duration(bar.predicted_cost_s)}</Table.Cell>
            <Table.Cell data-testid="iqp-batch-cost">{duration(bar.actual_cost_s)}</Table.Cell>
            <Table.Cell>{bar.attempts}</Table.Cell>
            <Table.Cell>
              <Files bar={bar} />
            </Table.Cell>
          </Table.Row>
        ))}
      </Table.Body>
    </Table.Root>
  );
}

function Files({ bar }: { bar: Bar }) {
  if (bar.file_count === 0) return <>—</>;
  return (
    <details>
      <summary data-testid="iqp-batch-files">{bar.file_count}</summary>
      <Box fontSize="xs" color="fg.muted">
        {Object.entries(bar.files).map(([stream, names]) => (
          <Box key={stream}>
            <Text fontWeight="semibold">{stream}</Text>
            {names.map((name) => (
              <Text key={name}>{name}</Text>
            ))}
          </Box>
        ))}
      </Box>
    </details>
  );
}
