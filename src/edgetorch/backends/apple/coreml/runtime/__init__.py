BACKEND_ID = "CoreMLBackend"
