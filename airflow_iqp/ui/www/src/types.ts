// The API's response models (airflow_iqp/ui/models.py), field for field;
// tests/ui/test_bundle.py checks that every interface here names the same fields as its model.

export type Outcome = "met" | "missed" | "at_risk" | "on_track";

export interface WindowSummary {
  id: number;
  dag_id: string;
  run_id: string | null;
  window_start: string;
  window_end: string;
  deadline: string;
  status: string;
  outcome: Outcome;
  deadline_met: boolean | null;
  predicted_finish: string | null;
  predicted_late_s: number | null;
  actual_finish: string | null;
  laxity_s: number | null;
  remaining_s: number;
  cost_s: number | null;
  single_batch_cost_s: number | null;
  single_batch_low_s: number | null;
  single_batch_high_s: number | null;
  cost_model: string | null;
  cost_ratio: number | null;
  batches: number;
  unit: string;
  expected_tuples: number;
  actual_tuples: number | null;
  result: string | null;
  incomplete: boolean;
  late_files: number;
}

export interface Wait {
  request: number;
  state: string;
  resource: number | null;
  reason: string;
  registered_s: number;
  granted_s: number | null;
  released_s: number | null;
  waited_s: number;
}

export interface Bar {
  label: string;
  kind: string;
  index: number | null;
  slot: number | null;
  status: string;
  reason: string | null;
  release_s: number | null;
  latest_start_s: number | null;
  planned_start_s: number | null;
  planned_end_s: number | null;
  actual_start_s: number | null;
  actual_end_s: number | null;
  predicted_cost_s: number | null;
  actual_cost_s: number | null;
  planned_size: number | null;
  actual_tuples: number | null;
  attempts: number;
  files: Record<string, string[]>;
  file_count: number;
  waits: Wait[];
}

export interface Axis {
  span_s: number;
  ticks_s: number[];
}

export interface Marks {
  window_end_s: number;
  deadline_s: number;
  predicted_finish_s: number | null;
  actual_finish_s: number | null;
  now_s: number | null;
}

export interface WindowDetail {
  now: string;
  window: WindowSummary;
  plan: Record<string, unknown>;
  axis: Axis;
  marks: Marks;
  bars: Bar[];
}

export interface QueryOverview {
  dag_id: string;
  query: string;
  mode: string;
  window_s: number | null;
  deadline_s: number | null;
  met: number;
  missed: number;
  at_risk: number;
  open: number;
  median_laxity_s: number | null;
  median_cost_ratio: number | null;
  windows: WindowSummary[];
}

export interface QueriesResponse {
  now: string;
  queries: QueryOverview[];
}

export interface WindowsResponse {
  dag_id: string;
  windows: WindowSummary[];
}

export interface Holder {
  request: number;
  redacted: boolean;
  dag_id: string | null;
  kind: string | null;
  slot: number | null;
  granted_at: string | null;
  held_s: number | null;
}

export interface ResourceView {
  id: number;
  fence: number;
  lease_expires: string | null;
  expired: boolean;
  holder: Holder | null;
}

export interface QueueEntry {
  position: number;
  request: number;
  redacted: boolean;
  dag_id: string | null;
  kind: string | null;
  slot: number | null;
  reason: string | null;
  deadline: string | null;
  remaining_s: number | null;
  laxity_s: number | null;
  waited_s: number;
}

export interface Ranked {
  request: number;
  redacted: boolean;
  dag_id: string | null;
  key: number | null;
  key_at: string | null;
}

export interface Grant {
  request: number;
  redacted: boolean;
  dag_id: string | null;
  kind: string | null;
  slot: number | null;
  resource: number | null;
  state: string;
  registered_at: string;
  granted_at: string;
  released_at: string | null;
  waited_s: number;
  held_s: number | null;
  others: Ranked[];
}

export interface DispatcherView {
  now: string;
  policy: string;
  resources: ResourceView[];
  queue: QueueEntry[];
  grants: Grant[];
}

export interface MissesView {
  now: string;
  since: string;
  missed: WindowSummary[];
  at_risk: WindowSummary[];
}

export interface CoreStep {
  at_s: number;
  cores: number;
}

export interface CapacityPlan {
  queries: number;
  confidence: number;
  open_cores: number | null;
  closed_cores: number | null;
  needed_by: string | null;
  speedup: string;
}

export interface CapacityView {
  now: string;
  since: string;
  span_s: number;
  ticks_s: number[];
  core_ticks: number[];
  used: CoreStep[];
  used_core_s: number;
  grants: number;
  default_grants: number;
  default_cores: number | null;
  plan: CapacityPlan | null;
  planned: CoreStep[];
  leased: CoreStep[];
  btu_s: number;
  btu_source: string;
  billed_core_s: number | null;
  fixed_billed_core_s: number | null;
}
