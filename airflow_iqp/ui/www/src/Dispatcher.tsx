// The dispatcher: each resource and who holds it, the waiting queue in the policy's order, and
// recent grants with what else was waiting. Requests of DAGs the user may not read are redacted
// by the API: only their place and timing show.
import { Badge, Box, Heading, Stack, Table, Text } from "@chakra-ui/react";

import { ColumnHeaders, Loading } from "./common";
import { useApi } from "./api";
import { duration, time } from "./format";
import type { DispatcherView, Grant, Ranked } from "./types";

function who(item: { redacted: boolean; dag_id: string | null; kind?: string | null; slot?: number | null }) {
  if (item.redacted) return <Text color="fg.muted">(a DAG you cannot read)</Text>;
  const job = item.kind === "merge" ? "merge" : item.slot !== null && item.slot !== undefined ? `slot ${item.slot}` : "";
  return (
    <Text>
      {item.dag_id} {job && <Text as="span" color="fg.muted">{job}</Text>}
    </Text>
  );
}

export function Dispatcher() {
  const loaded = useApi<DispatcherView>("dispatcher");
  return (
    <Stack gap={3} data-testid="iqp-dispatcher">
      <Heading size="md">Dispatcher</Heading>
      <Loading loaded={loaded}>
        {(view) => (
          <Stack gap={4}>
            <Text fontSize="sm" color="fg.muted">
              policy <Badge>{view.policy}</Badge>
            </Text>
            <Table.Root size="sm">
              <ColumnHeaders names={["resource", "holder", "held for", "lease expires", "fence"]} />
              <Table.Body>
                {view.resources.map((r) => (
                  <Table.Row key={r.id} data-testid="iqp-resource">
                    <Table.Cell>{r.id}</Table.Cell>
                    <Table.Cell>{r.holder ? who(r.holder) : <Text color="fg.muted">free</Text>}</Table.Cell>
                    <Table.Cell>{duration(r.holder?.held_s)}</Table.Cell>
                    <Table.Cell>
                      {time(r.lease_expires)} {r.expired && <Badge colorPalette="red">expired</Badge>}
                    </Table.Cell>
                    <Table.Cell>{r.fence}</Table.Cell>
                  </Table.Row>
                ))}
              </Table.Body>
            </Table.Root>
            <Box>
              <Heading size="sm">Waiting, in the order {view.policy} serves them</Heading>
              {view.queue.length === 0 ? (
                <Text color="fg.muted">Nothing is waiting.</Text>
              ) : (
                <Table.Root size="sm">
                  <ColumnHeaders names={["#", "job", "reason", "deadline", "remaining work", "laxity", "waiting for"]} />
                  <Table.Body>
                    {view.queue.map((q) => (
                      <Table.Row key={q.request} data-testid="iqp-queue-entry">
                        <Table.Cell>{q.position}</Table.Cell>
                        <Table.Cell>{who(q)}</Table.Cell>
                        <Table.Cell>{q.reason ?? ""}</Table.Cell>
                        <Table.Cell>{time(q.deadline)}</Table.Cell>
                        <Table.Cell>{duration(q.remaining_s)}</Table.Cell>
                        <Table.Cell>{duration(q.laxity_s)}</Table.Cell>
                        <Table.Cell>{duration(q.waited_s)}</Table.Cell>
                      </Table.Row>
                    ))}
                  </Table.Body>
                </Table.Root>
              )}
            </Box>
            <Box>
              <Heading size="sm">Recent grants</Heading>
              {view.grants.length === 0 ? (
                <Text color="fg.muted">No grant in this period.</Text>
              ) : (
                <Table.Root size="sm">
                  <ColumnHeaders names={["granted", "job", "resource", "waited", "held", "also waiting"]} />
                  <Table.Body>
                    {view.grants.map((g) => (
                      <GrantRow key={g.request} grant={g} />
                    ))}
                  </Table.Body>
                </Table.Root>
              )}
            </Box>
          </Stack>
        )}
      </Loading>
    </Stack>
  );
}

function GrantRow({ grant }: { grant: Grant }) {
  return (
    <Table.Row data-testid="iqp-grant">
      <Table.Cell>{time(grant.granted_at)}</Table.Cell>
      <Table.Cell>{who(grant)}</Table.Cell>
      <Table.Cell>{grant.resource ?? ""}</Table.Cell>
      <Table.Cell>{duration(grant.waited_s)}</Table.Cell>
      <Table.Cell>{duration(grant.held_s)}</Table.Cell>
      <Table.Cell>{grant.others.length === 0 ? "—" : grant.others.map(other).reduce((a, b) => `${a}, ${b}`)}</Table.Cell>
    </Table.Row>
  );
}

function other(r: Ranked): string {
  const name = r.redacted ? "(hidden)" : r.dag_id;
  const key = r.key_at ? time(r.key_at) : r.key === null ? "" : duration(r.key);
  return key ? `${name} (${key})` : `${name}`;
}
