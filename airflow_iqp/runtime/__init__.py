"""What happens to one window at run time, between the pure core and the Airflow operators: its
input as a listing shows it (`inputs`), its size and plan (`sizing`), the cost model and rate it
is planned with (`costs`), its demand on the shared resource (`demand`), what a dynamic slot may
do now (`slots`), replanning a static window's remaining batches (`replan`), the dispatcher's
lease a job holds while it runs (`lease`), and every open window's forecast kept in the ledger
(`forecasts`). The operators and triggers call it; it calls neither (an import-linter contract).
"""
