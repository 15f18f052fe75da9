// Small pieces every view shares: loading and error states, badges, a labelled number.
import { Badge, Box, Spinner, Table, Text } from "@chakra-ui/react";
import type { ReactNode } from "react";

import type { Loaded } from "./api";
import { OUTCOME_PALETTE, STATUS_PALETTE } from "./palette";

export function Loading<T>({
  loaded,
  notFound,
  children,
}: {
  loaded: Loaded<T>;
  notFound?: string;
  children: (data: T) => ReactNode;
}) {
  if (loaded.state === "loading") return <Spinner size="sm" />;
  if (loaded.state === "ready") return <>{children(loaded.data)}</>;
  if (loaded.status === 404 && notFound) return <Text color="fg.muted">{notFound}</Text>;
  const hint = loaded.status === 401 ? " Your session has expired: log in again." : "";
  return (
    <Text color="fg.error" data-testid="iqp-error">
      {loaded.message || "The IQP API did not answer"} ({loaded.status}).{hint}
    </Text>
  );
}

const OUTCOME_LABEL: Record<string, string> = {
  met: "met",
  missed: "missed",
  at_risk: "at risk",
  on_track: "on track",
};

export function OutcomeBadge({ outcome }: { outcome: string }) {
  return (
    <Badge colorPalette={OUTCOME_PALETTE[outcome] ?? "gray"} data-testid="iqp-outcome">
      {OUTCOME_LABEL[outcome] ?? outcome}
    </Badge>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <Badge variant="outline" colorPalette={STATUS_PALETTE[status] ?? "gray"}>
      {status}
    </Badge>
  );
}

export function Figure({ label, value, testId }: { label: string; value: ReactNode; testId?: string }) {
  return (
    <Box minW="110px">
      <Text fontSize="xs" color="fg.muted">
        {label}
      </Text>
      <Text fontWeight="semibold" data-testid={testId}>
        {value}
      </Text>
    </Box>
  );
}

/** A table's header row: one column per name. */
export function ColumnHeaders({ names }: { names: ReactNode[] }) {
  return (
    <Table.Header>
      <Table.Row>
        {names.map((name, i) => (
          <Table.ColumnHeader key={i}>{name}</Table.ColumnHeader>
        ))}
      </Table.Row>
    </Table.Header>
  );
}
