-- name: cq3
-- streams: lineitem
-- static:
select l_suppkey, count(*) as cnt
from lineitem
group by l_suppkey
