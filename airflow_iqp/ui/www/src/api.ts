// Reads the monitor's JSON API with the browser's Airflow session (the httpOnly `_token`
// cookie goes along with a same-origin request), polling while the page is open.
import { useEffect, useState } from "react";

export const POLL_MS = 10_000;

export type Loaded<T> =
  | { state: "loading" }
  | { state: "error"; status: number; message: string }
  | { state: "ready"; data: T };

// Relative to the UI's <base href>, so the bundle follows Airflow's [api] base_url.
export function apiUrl(path: string): string {
  return new URL(`iqp/api/v1/${path}`, document.baseURI).href;
}

export function useApi<T>(path: string, pollMs: number = POLL_MS): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: "loading" });
  useEffect(() => {
    const controller = new AbortController();
    setLoaded({ state: "loading" });
    const load = async () => {
      try {
        const response = await fetch(apiUrl(path), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
          signal: controller.signal,
        });
        if (!response.ok) {
          const body: { detail?: unknown } = await response.json().catch(() => ({}));
          const message = typeof body.detail === "string" ? body.detail : response.statusText;
          setLoaded({ state: "error", status: response.status, message });
          return;
        }
        setLoaded({ state: "ready", data: (await response.json()) as T });
      } catch (error) {
        if (!controller.signal.aborted) setLoaded({ state: "error", status: 0, message: String(error) });
      }
    };
    void load();
    const timer = window.setInterval(() => void load(), pollMs);
    return () => {
      controller.abort();
      window.clearInterval(timer);
    };
  }, [path, pollMs]);
  return loaded;
}
