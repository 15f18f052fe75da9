-- name: cq1
-- streams: orders
-- static:
select count(*) as cnt
from orders
