// A library build of one UMD file: the Airflow UI loads it with import() and shares its own
// React, router, Chakra and Emotion through globals, so none of them is bundled (a second
// React would break hooks, a second Chakra would lose the theme and dark mode).
import { defineConfig } from "vite";

const hostGlobals: Record<string, string> = {
  react: "React",
  "react-dom": "ReactDOM",
  "react/jsx-runtime": "ReactJSXRuntime",
  "react-router-dom": "ReactRouterDOM",
  "@chakra-ui/react": "ChakraUI",
  "@emotion/react": "EmotionReact",
};

export default defineConfig({
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "../static",
    emptyOutDir: false, // static/ also holds the icon and the sources' hash
    minify: "esbuild",
    sourcemap: false,
    lib: {
      entry: "src/main.tsx",
      formats: ["umd"],
      name: "AirflowPlugin",
      fileName: () => "iqp.umd.js",
    },
    rollupOptions: {
      external: Object.keys(hostGlobals),
      output: { globals: hostGlobals },
    },
  },
});
