select * from {{ ref('people_table') }} where id < 0
