-- name: cq4
-- streams: lineitem
-- static:
select l_partkey, count(*) as cnt
from lineitem
group by l_partkey
