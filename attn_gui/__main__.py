from attn_gui.launch import main

raise SystemExit(main())
