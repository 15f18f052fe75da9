// How numbers read on the page; the browser test (tests/ui/test_browser.py) formats the
// ledger's values the same way to compare them.
const DASH = "—";

export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return DASH;
  const sign = seconds < 0 ? "-" : "";
  const size = Math.abs(seconds);
  if (size < 100) return `${sign}${size.toFixed(1)} s`;
  const total = Math.round(size);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const rest = total % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  return hours > 0 ? `${sign}${hours}h ${two(minutes)}m` : `${sign}${minutes}m ${two(rest)}s`;
}

export function ratio(value: number | null | undefined): string {
  return value === null || value === undefined ? DASH : `×${value.toFixed(2)}`;
}

export function count(value: number | null | undefined): string {
  return value === null || value === undefined ? DASH : String(value);
}

export function time(iso: string | null | undefined): string {
  if (!iso) return DASH;
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$|Z$/, "").concat(" UTC");
}

export function coreSeconds(value: number | null | undefined): string {
  return value === null || value === undefined ? DASH : `${Math.round(value).toLocaleString("en-US")} core-s`;
}

// `seconds` after `iso` as a clock time, hours and minutes in UTC; to the nearest second, since
// Date.parse keeps milliseconds of the API's microseconds.
export function clockAfter(iso: string, seconds: number): string {
  const at = Math.round((Date.parse(iso) + seconds * 1000) / 1000) * 1000;
  return new Date(at).toISOString().slice(11, 16);
}
