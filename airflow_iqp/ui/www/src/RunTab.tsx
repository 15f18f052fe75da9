// The tab on a DAG run: the window that run processes. The host shows the tab on every DAG,
// so a run of any other DAG gets a short note instead.
import { Box } from "@chakra-ui/react";

import { useApi } from "./api";
import { Loading } from "./common";
import type { WindowDetail } from "./types";
import { WindowView } from "./WindowView";

export function RunTab({ dagId, runId }: { dagId?: string; runId?: string }) {
  const path = `dags/${encodeURIComponent(dagId ?? "")}/runs/${encodeURIComponent(runId ?? "")}/window`;
  const loaded = useApi<WindowDetail>(path);
  return (
    <Box p={2}>
      <Loading loaded={loaded} notFound="This run is not a window of an intermittent query.">
        {(detail) => <WindowView detail={detail} />}
      </Loading>
    </Box>
  );
}
