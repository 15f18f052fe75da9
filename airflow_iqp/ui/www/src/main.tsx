// The bundle the Airflow UI loads for the plugin's React apps. It registers one component per
// app under the app's name (airflow_iqp/plugins/ui.py): the host imports one URL once, so the
// single `AirflowPlugin` global would serve only the first app it loads.
import { DeadlinesCard } from "./DeadlinesCard";
import { NavPage } from "./NavPage";
import { RunTab } from "./RunTab";

const apps = {
  IQP: NavPage,
  "IQP window": RunTab,
  "IQP deadlines": DeadlinesCard,
};

for (const [name, component] of Object.entries(apps)) {
  Reflect.set(globalThis, name, component);
}

export default NavPage;
