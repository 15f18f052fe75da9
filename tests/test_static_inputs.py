"""Static inputs: a path Spark reads (absolute, or a URI) or a Spark catalog table; nothing
relative, since workers do not share the DAG file's working directory."""

from __future__ import annotations

import pytest

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.static import StaticInput, static_input


@pytest.mark.parametrize(
    "value", ["/data/dim/products", "/data/dim/products.parquet", "file:///data/dim/products", "s3://b/dim/p/"]
)
def test_an_absolute_path_or_uri_is_read_as_parquet(value: str) -> None:
    assert static_input("products", value) == StaticInput(path=value)
    assert static_input("products", value).to_dict() == {"path": value, "table": None}


@pytest.mark.parametrize("value", ["products", "sales_db.products", "spark_catalog.sales_db.products", "_p1"])
def test_a_catalog_name_is_a_table(value: str) -> None:
    assert static_input("products", value) == StaticInput(table=value)
    assert static_input("products", value).to_dict() == {"path": None, "table": value}


def test_surrounding_blanks_are_dropped() -> None:
    assert static_input("products", "  /data/dim/products \n") == StaticInput(path="/data/dim/products")
    assert static_input("products", " sales_db.products ") == StaticInput(table="sales_db.products")


@pytest.mark.parametrize(
    "value", ["dim/products", "./products", "../dim/products", "a.b.c.d", "1products", "sales-db.products"]
)
def test_anything_else_is_refused_with_both_forms_shown(value: str) -> None:
    with pytest.raises(
        InvalidDeclaration, match=r"static\['products'\] = .* is neither an absolute path or URI"
    ) as info:
        static_input("products", value)
    message = str(info.value)
    assert "'/data/dim/products'" in message
    assert "'sales_db.products'" in message
    assert "relative paths are refused" in message


@pytest.mark.parametrize("value", ["", "   ", None, 3])
def test_a_value_that_is_no_text_is_refused(value: object) -> None:
    with pytest.raises(InvalidDeclaration, match=r"static\['products'\] must be a path or a catalog table name"):
        static_input("products", value)
