//! A blocking Arrow Flight SQL client for the tests: `arrow-flight`'s own
//! `FlightSqlServiceClient` on a current-thread runtime, with every failure as the gRPC
//! status the server sent.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::FlightInfo;
use arrow_flight::error::FlightError;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use tonic::Status;
use tonic::transport::Channel;

use super::Server;

/// The status of a failed call (a client-side failure is reported as `Unknown`).
pub fn status_of(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => Status::unknown(format!("client error: {other}")),
    }
}

/// The value of a call that must succeed (else the status, in the panic).
pub fn ok<T>(r: Result<T, Status>) -> T {
    r.unwrap_or_else(|s| panic!("{:?}: {}", s.code(), s.message()))
}

/// One connection (one session after [`Flight::login`]).
pub struct Flight {
    pub rt: tokio::runtime::Runtime,
    pub client: FlightSqlServiceClient<Channel>,
}

/// A fetched result: the FlightInfo's schema, the stream's schema, its batches.
pub struct Fetched {
    pub info_schema: SchemaRef,
    pub stream_schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub info: FlightInfo,
}

impl Fetched {
    pub fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

impl Flight {
    /// Connect without authenticating.
    pub fn connect(server: &Server) -> Self {
        let url = server.flight.clone().expect("the server's flight endpoint");
        Self::connect_with(Channel::from_shared(url).expect("url"))
    }

    /// Connect through a configured endpoint (TLS, ...), without authenticating.
    pub fn connect_with(endpoint: tonic::transport::Endpoint) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let channel = rt.block_on(endpoint.connect()).expect("connect");
        Self {
            rt,
            client: FlightSqlServiceClient::new(channel),
        }
    }

    /// Connect and handshake as `user`.
    pub fn login(server: &Server, user: (&str, &str)) -> Self {
        let mut f = Self::connect(server);
        f.rt.block_on(f.client.handshake(user.0, user.1))
            .expect("handshake");
        f
    }

    /// GetFlightInfo for a statement (executes DDL/DML), then its DoGet.
    pub fn query(&mut self, sql: &str) -> Result<Fetched, Status> {
        let info = self.info(sql)?;
        self.fetch(info)
    }

    /// GetFlightInfo for a statement only.
    pub fn info(&mut self, sql: &str) -> Result<FlightInfo, Status> {
        self.rt
            .block_on(self.client.execute(sql.to_string(), None))
            .map_err(status_of)
    }

    /// DoGet of a FlightInfo's first endpoint.
    pub fn fetch(&mut self, info: FlightInfo) -> Result<Fetched, Status> {
        // A FlightInfo without a schema (a statement whose values are still to be
        // bound) announces the empty one.
        let info_schema = std::sync::Arc::new(if info.schema.is_empty() {
            arrow::datatypes::Schema::empty()
        } else {
            info.clone().try_decode_schema().expect("schema")
        });
        let ticket = info.endpoint[0].ticket.clone().expect("ticket");
        let client = &mut self.client;
        let (stream_schema, batches) = self.rt.block_on(async {
            let mut stream = client.do_get(ticket).await.map_err(status_of)?;
            let mut batches = Vec::new();
            while let Some(b) = stream.try_next().await.map_err(status_of)? {
                batches.push(b);
            }
            let schema = stream.schema().cloned().expect("stream schema");
            Ok::<_, Status>((schema, batches))
        })?;
        Ok(Fetched {
            info_schema,
            stream_schema,
            batches,
            info,
        })
    }

    /// DoPut of `CommandStatementUpdate`: the affected rows.
    pub fn update(&mut self, sql: &str) -> Result<i64, Status> {
        self.rt
            .block_on(self.client.execute_update(sql.to_string(), None))
            .map_err(status_of)
    }

    /// A prepared statement, bound to `params` (if any), as a query.
    pub fn prepared_query(
        &mut self,
        sql: &str,
        params: Option<RecordBatch>,
    ) -> Result<Fetched, Status> {
        let client = &mut self.client;
        let info = self.rt.block_on(async {
            let mut stmt = client
                .prepare(sql.to_string(), None)
                .await
                .map_err(status_of)?;
            if let Some(p) = params {
                stmt.set_parameters(p).map_err(status_of)?;
            }
            let info = stmt.execute().await.map_err(status_of)?;
            Ok::<_, Status>(info)
        })?;
        self.fetch(info)
    }

    /// A prepared statement, bound to `params`, as an update: the affected rows.
    pub fn prepared_update(
        &mut self,
        sql: &str,
        params: Option<RecordBatch>,
    ) -> Result<i64, Status> {
        let client = &mut self.client;
        self.rt.block_on(async {
            let mut stmt = client
                .prepare(sql.to_string(), None)
                .await
                .map_err(status_of)?;
            if let Some(p) = params {
                stmt.set_parameters(p).map_err(status_of)?;
            }
            let n = stmt.execute_update().await.map_err(status_of)?;
            stmt.close().await.map_err(status_of)?;
            Ok(n)
        })
    }

    /// A raw action; the bodies of its results.
    pub fn action(&mut self, kind: &str, body: Vec<u8>) -> Result<Vec<bytes::Bytes>, Status> {
        let client = &mut self.client;
        self.rt.block_on(async {
            let action = arrow_flight::Action::new(kind, body);
            let results = client.do_action(action).await.map_err(status_of)?;
            let results: Vec<arrow_flight::Result> = results.try_collect().await?;
            Ok(results.into_iter().map(|r| r.body).collect())
        })
    }
}
