// The dashboard card: deadline misses of the last week and windows at risk of one now.
import { Box, Flex, Heading, Link, Stack, Text } from "@chakra-ui/react";
import { Link as RouterLink } from "react-router-dom";

import { Loading, OutcomeBadge } from "./common";
import { useApi } from "./api";
import { duration, time } from "./format";
import type { MissesView, WindowSummary } from "./types";

const SHOWN = 5;

export function DeadlinesCard() {
  const loaded = useApi<MissesView>("misses");
  return (
    <Box borderWidth="1px" borderColor="border" borderRadius="md" p={4} data-testid="iqp-deadlines">
      <Heading size="sm" mb={2}>
        Intermittent queries: deadlines
      </Heading>
      <Loading loaded={loaded}>
        {(view) => (
          <Stack gap={2}>
            <Flex gap={6}>
              <Text>
                <Text as="span" fontWeight="bold" data-testid="iqp-missed-count">
                  {view.missed.length}
                </Text>{" "}
                missed since {time(view.since)}
              </Text>
              <Text>
                <Text as="span" fontWeight="bold" data-testid="iqp-at-risk-count">
                  {view.at_risk.length}
                </Text>{" "}
                at risk now
              </Text>
            </Flex>
            {[...view.at_risk, ...view.missed].slice(0, SHOWN).map((w) => (
              <WindowLine key={w.id} w={w} />
            ))}
          </Stack>
        )}
      </Loading>
    </Box>
  );
}

function WindowLine({ w }: { w: WindowSummary }) {
  const to = `/plugin/iqp?dag_id=${encodeURIComponent(w.dag_id)}&window=${w.id}`;
  return (
    <Flex gap={2} align="center" fontSize="sm">
      <OutcomeBadge outcome={w.outcome} />
      <Link asChild colorPalette="blue">
        <RouterLink to={to}>{w.dag_id}</RouterLink>
      </Link>
      <Text color="fg.muted">
        window {time(w.window_start)}, laxity {duration(w.laxity_s)}
        {w.outcome === "at_risk" && w.predicted_late_s !== null && w.predicted_late_s > 0
          ? `, predicted ${duration(w.predicted_late_s)} late`
          : ""}
      </Text>
    </Flex>
  );
}
