// Chakra's semantic tokens, resolved through the host's theme: colours follow Airflow's
// light and dark mode.
import { useToken } from "@chakra-ui/react";

const TOKENS = [
  "fg",
  "fg.muted",
  "fg.error",
  "border",
  "bg.muted",
  "green.solid",
  "red.solid",
  "blue.solid",
  "orange.solid",
  "gray.solid",
  "gray.muted",
] as const;

export type Token = (typeof TOKENS)[number];
export type Palette = Record<Token, string>;

export function usePalette(): Palette {
  const values = useToken("colors", TOKENS as unknown as string[]);
  return Object.fromEntries(TOKENS.map((token, i) => [token, values[i]])) as Palette;
}

// A job's status as a colour palette name (badges) and as a token (chart bars).
export const STATUS_PALETTE: Record<string, string> = {
  done: "green",
  failed: "red",
  running: "blue",
  waiting: "orange",
  planned: "gray",
  skipped: "gray",
};

export const OUTCOME_PALETTE: Record<string, string> = {
  met: "green",
  missed: "red",
  at_risk: "orange",
  on_track: "blue",
};

export function statusToken(status: string): Token {
  return `${STATUS_PALETTE[status] ?? "gray"}.solid` as Token;
}
