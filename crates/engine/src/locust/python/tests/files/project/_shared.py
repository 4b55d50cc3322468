PATH = "/second"
