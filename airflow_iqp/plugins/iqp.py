"""Registers our timetable: Airflow only deserializes custom timetables that a plugin names."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_iqp.timetables import WindowTimetable


class IqpPlugin(AirflowPlugin):
    """The `airflow_iqp` plugin: the window timetable that schedules one run per query window."""

    name = "airflow_iqp"
    timetables = [WindowTimetable]
