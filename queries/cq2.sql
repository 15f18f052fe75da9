-- name: cq2
-- streams: orders
-- static:
select o_orderpriority, count(*) as cnt
from orders
group by o_orderpriority
