// The nav page "IQP": every query with its recent windows; choosing a query lists its windows,
// choosing a window shows its chart (both kept in the URL, so views can be linked); then the
// dispatcher, the capacity over time and the deadline card.
import { Box, Heading, Link, Stack, Table, Text } from "@chakra-ui/react";
import { useSearchParams } from "react-router-dom";

import { useApi } from "./api";
import { Capacity } from "./Capacity";
import { ColumnHeaders, Loading, OutcomeBadge, StatusBadge } from "./common";
import { DeadlinesCard } from "./DeadlinesCard";
import { Dispatcher } from "./Dispatcher";
import { duration, ratio, time } from "./format";
import type { QueriesResponse, QueryOverview, WindowDetail } from "./types";
import { WindowView } from "./WindowView";

export function NavPage() {
  const [params, setParams] = useSearchParams();
  const dagId = params.get("dag_id");
  const windowId = params.get("window");
  const loaded = useApi<QueriesResponse>("queries");
  return (
    <Stack gap={6} p={4} data-testid="iqp-nav">
      <Heading size="lg">Intermittent queries</Heading>
      <DeadlinesCard />
      <Loading loaded={loaded}>
        {(data) => (
          <Stack gap={6}>
            <Queries queries={data.queries} choose={(dag) => setParams({ dag_id: dag })} chosen={dagId} />
            {dagId && (
              <Windows
                query={data.queries.find((q) => q.dag_id === dagId)}
                chosen={windowId}
                choose={(id) => setParams({ dag_id: dagId, window: String(id) })}
              />
            )}
          </Stack>
        )}
      </Loading>
      {dagId && windowId && <Window dagId={dagId} windowId={windowId} />}
      <Dispatcher />
      <Capacity />
    </Stack>
  );
}

function Queries({
  queries,
  chosen,
  choose,
}: {
  queries: QueryOverview[];
  chosen: string | null;
  choose: (dagId: string) => void;
}) {
  if (queries.length === 0) return <Text color="fg.muted">No intermittent query you may read has run yet.</Text>;
  return (
    <Table.Root size="sm" interactive data-testid="iqp-queries">
      <ColumnHeaders names={["DAG", "query", "mode", "window / deadline", "met", "missed", "at risk", "open", "median laxity", "cost vs one batch"]} />
      <Table.Body>
        {queries.map((q) => (
          <Table.Row
            key={q.dag_id}
            data-testid="iqp-query"
            data-dag-id={q.dag_id}
            onClick={() => choose(q.dag_id)}
            cursor="pointer"
            bg={q.dag_id === chosen ? "bg.muted" : undefined}
          >
            <Table.Cell>
              <Link colorPalette="blue">{q.dag_id}</Link>
            </Table.Cell>
            <Table.Cell>{q.query}</Table.Cell>
            <Table.Cell>{q.mode}</Table.Cell>
            <Table.Cell>
              {duration(q.window_s)} / {duration(q.deadline_s)}
            </Table.Cell>
            <Table.Cell data-testid="iqp-met">{q.met}</Table.Cell>
            <Table.Cell data-testid="iqp-missed">{q.missed}</Table.Cell>
            <Table.Cell data-testid="iqp-at-risk">{q.at_risk}</Table.Cell>
            <Table.Cell>{q.open}</Table.Cell>
            <Table.Cell data-testid="iqp-median-laxity">{duration(q.median_laxity_s)}</Table.Cell>
            <Table.Cell data-testid="iqp-median-ratio">{ratio(q.median_cost_ratio)}</Table.Cell>
          </Table.Row>
        ))}
      </Table.Body>
    </Table.Root>
  );
}

function Windows({
  query,
  chosen,
  choose,
}: {
  query: QueryOverview | undefined;
  chosen: string | null;
  choose: (id: number) => void;
}) {
  if (!query) return <Text color="fg.muted">You may not read this DAG, or it has no intermittent query.</Text>;
  return (
    <Box>
      <Heading size="md" mb={2}>
        {query.dag_id}: recent windows
      </Heading>
      <Table.Root size="sm" interactive data-testid="iqp-windows">
        <ColumnHeaders names={["window start", "outcome", "status", "deadline", "finished", "laxity", "batches", "cost", "vs one batch"]} />
        <Table.Body>
          {query.windows.map((w) => (
            <Table.Row
              key={w.id}
              data-testid="iqp-window-row"
              data-window-id={w.id}
              onClick={() => choose(w.id)}
              cursor="pointer"
              bg={String(w.id) === chosen ? "bg.muted" : undefined}
            >
              <Table.Cell>{time(w.window_start)}</Table.Cell>
              <Table.Cell>
                <OutcomeBadge outcome={w.outcome} />
              </Table.Cell>
              <Table.Cell>
                <StatusBadge status={w.status} />
              </Table.Cell>
              <Table.Cell>{time(w.deadline)}</Table.Cell>
              <Table.Cell>{time(w.actual_finish)}</Table.Cell>
              <Table.Cell>{duration(w.laxity_s)}</Table.Cell>
              <Table.Cell>{w.batches}</Table.Cell>
              <Table.Cell>{duration(w.cost_s)}</Table.Cell>
              <Table.Cell>{ratio(w.cost_ratio)}</Table.Cell>
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
    </Box>
  );
}

function Window({ dagId, windowId }: { dagId: string; windowId: string }) {
  const loaded = useApi<WindowDetail>(`dags/${encodeURIComponent(dagId)}/windows/${encodeURIComponent(windowId)}`);
  return (
    <Loading loaded={loaded} notFound="No such window.">
      {(detail) => <WindowView detail={detail} runLink />}
    </Loading>
  );
}
