"""The TPC-H producer, one producer of input files among others: `iqp data generate` makes a
stream of orders and lineitem files and its static tables, `iqp data replay` lands the files in
plain directories over time. The Airflow side never imports this package (an import-linter
contract says so): it reads whatever files land, as it would any team's.
"""
